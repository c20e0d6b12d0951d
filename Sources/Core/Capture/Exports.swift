// The capture API's value types (PhotoSettings, BracketSettings, ResolvedPhotoSettings, the
// pure machines) live in CaptureScheduler; a user of the session imports Capture alone.
@_exported import CaptureScheduler

/// How much memory a camera configuration's buffers may take. A Raspberry Pi 4 allocates them
/// from its CMA pool (often 256 to 512 MB, shared with the display), a Pi 5 from ordinary
/// memory through its IOMMU; a 12 MP still and raw pair with 13 buffers each is about 550 MB
/// (CAMERA-FACTS §9). A configuration over the budget is refused before anything is allocated.
/// `MemoryBudget.system()` (ShutterbugPosix) reads the system's.
public struct MemoryBudget: Sendable, Hashable, CustomStringConvertible {
    public var bytes: Int
    /// Where the figure came from, for messages ("CMA pool", "half the available memory").
    public var source: String

    public init(bytes: Int, source: String) {
        self.bytes = bytes
        self.source = source
    }

    public var description: String { "\(Self.megabytes(bytes)) (\(source))" }

    /// "18.5 MB", in MiB with one decimal below 100.
    public static func megabytes(_ bytes: Int) -> String {
        let mb = Double(bytes) / 1_048_576
        return mb < 100 ? "\(Double(Int(mb * 10 + 0.5)) / 10) MB" : "\(Int(mb.rounded())) MB"
    }
}

/// Where every request slot is, as a pure state machine: queued with the camera, held by photos
/// or sinks (with how many holders), or spare. At every step each slot is in exactly one state,
/// the three counts add up to the slots allocated, and at most `depth` are queued, so a
/// capture's first request waits behind no more than the pipeline depth, whatever is held.
public struct SlotLedger: Sendable, Hashable {
    public enum State: Sendable, Hashable {
        case queued
        /// Held by this many photos or sinks; spare again when the last lets go.
        case held(Int)
        case spare
    }

    public let depth: Int
    public private(set) var states: [State]
    private var spare: [Int]
    public private(set) var queuedCount = 0

    /// - Parameters:
    ///   - slots: request slots allocated.
    ///   - depth: requests to keep queued.
    public init(slots: Int, depth: Int) {
        precondition(slots >= 0 && depth >= 1, "a ledger has slots and a depth of at least one")
        self.depth = depth
        states = Array(repeating: .spare, count: slots)
        spare = Array((0..<slots).reversed())
    }

    public var slots: Int { states.count }
    public var spareCount: Int { spare.count }
    public var heldCount: Int { slots - queuedCount - spareCount }
    /// Holders over all held slots (a slot two photos share counts twice).
    public var holders: Int { states.reduce(0) { if case .held(let n) = $1 { return $0 + n } else { return $0 } } }

    /// The next spare slot to queue, while fewer than `depth` are queued; the slot is then
    /// counted as queued.
    public mutating func nextToQueue() -> Int? {
        guard queuedCount < depth, let slot = spare.popLast() else { return nil }
        states[slot] = .queued
        queuedCount += 1
        return slot
    }

    /// A slot chosen by `nextToQueue` could not be queued after all (the camera refused it).
    public mutating func queueFailed(_ slot: Int) {
        guard states.indices.contains(slot), states[slot] == .queued else { return }
        states[slot] = .spare
        queuedCount -= 1
        spare.append(slot)
    }

    /// A queued slot came back; `holders` photos or sinks keep its buffers (0: spare again).
    /// Returns false for a slot that was not queued (a completion the ledger never sent).
    @discardableResult
    public mutating func completed(_ slot: Int, holders: Int) -> Bool {
        guard states.indices.contains(slot), states[slot] == .queued else { return false }
        queuedCount -= 1
        if holders > 0 {
            states[slot] = .held(holders)
        } else {
            states[slot] = .spare
            spare.append(slot)
        }
        return true
    }

    /// One holder of `slot` let go. Returns false when the slot was not held (a second release
    /// of the same photo), which changes nothing.
    @discardableResult
    public mutating func released(_ slot: Int) -> Bool {
        guard states.indices.contains(slot), case .held(let n) = states[slot] else { return false }
        if n > 1 {
            states[slot] = .held(n - 1)
        } else {
            states[slot] = .spare
            spare.append(slot)
        }
        return true
    }
}

/// A first-in first-out ring of values that reuses its storage, so steady-state pushes and pops
/// do not allocate. It grows (doubling) only when full.
public struct Ring<Element> {
    private var storage: [Element?]
    private var head = 0
    public private(set) var count = 0

    public init(capacity: Int) {
        storage = Array(repeating: nil, count: max(1, capacity))
    }

    public var isEmpty: Bool { count == 0 }
    public var capacity: Int { storage.count }

    public mutating func append(_ element: Element) {
        if count == storage.count { grow() }
        storage[(head + count) % storage.count] = element
        count += 1
    }

    /// Appends, first dropping the oldest element when the ring holds `limit` (at most its
    /// capacity): a window of the newest values, kept without growing or copying one out.
    public mutating func append(_ element: Element, keepingAtMost limit: Int) {
        precondition(limit >= 1 && limit <= storage.count, "keepingAtMost \(limit) outside 1...\(storage.count)")
        while count >= limit {
            storage[head] = nil
            head = head + 1 == storage.count ? 0 : head + 1
            count -= 1
        }
        var i = head + count
        if i >= storage.count { i -= storage.count }
        storage[i] = element
        count += 1
    }

    public mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head]
        storage[head] = nil
        head = (head + 1) % storage.count
        count -= 1
        return element
    }

    public var first: Element? { count > 0 ? storage[head] : nil }

    /// The newest element.
    public var last: Element? { count > 0 ? storage[(head + count - 1) % storage.count] : nil }

    /// Replaces the newest element; the ring must not be empty.
    public mutating func replaceLast(with element: Element) {
        precondition(count > 0, "replaceLast on an empty ring")
        storage[(head + count - 1) % storage.count] = element
    }

    /// Removes and returns every element, oldest first.
    public mutating func removeAll() -> [Element] {
        var out: [Element] = []
        out.reserveCapacity(count)
        while let e = popFirst() { out.append(e) }
        return out
    }

    private mutating func grow() {
        var bigger: [Element?] = Array(repeating: nil, count: storage.count * 2)
        for i in 0..<count { bigger[i] = storage[(head + i) % storage.count] }
        storage = bigger
        head = 0
    }
}

extension Ring: Sendable where Element: Sendable {}

/// A first-in first-out ring of values that reuses its storage, so steady-state pushes and pops
/// do not allocate. It grows (doubling) only when full.
///
/// Inlinable: it is used on the per-frame path from other modules, which specialise it for
/// their element types instead of going through run-time generics.
public struct Ring<Element> {
    @usableFromInline var storage: [Element?]
    @usableFromInline var head = 0
    @usableFromInline var stored: Int
    /// The elements held.
    @inlinable public var count: Int { stored }

    @inlinable
    public init(capacity: Int) {
        stored = 0
        storage = Array(repeating: nil, count: max(1, capacity))
    }

    @inlinable
    public var isEmpty: Bool { count == 0 }
    @inlinable
    public var capacity: Int { storage.count }

    @inlinable
    public mutating func append(_ element: Element) {
        if count == storage.count { grow() }
        storage[(head + count) % storage.count] = element
        stored += 1
    }

    /// Appends, first dropping the oldest element when the ring holds `limit` (at most its
    /// capacity): a window of the newest values, kept without growing or copying one out.
    @inlinable
    public mutating func append(_ element: Element, keepingAtMost limit: Int) {
        precondition(limit >= 1 && limit <= storage.count, "keepingAtMost \(limit) outside 1...\(storage.count)")
        while count >= limit {
            storage[head] = nil
            head = head + 1 == storage.count ? 0 : head + 1
            stored -= 1
        }
        var i = head + count
        if i >= storage.count { i -= storage.count }
        storage[i] = element
        stored += 1
    }

    @inlinable
    public mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head]
        storage[head] = nil
        head = (head + 1) % storage.count
        stored -= 1
        return element
    }

    @inlinable
    public var first: Element? { count > 0 ? storage[head] : nil }

    /// The newest element.
    @inlinable
    public var last: Element? { count > 0 ? storage[(head + count - 1) % storage.count] : nil }

    /// Replaces the newest element; the ring must not be empty.
    @inlinable
    public mutating func replaceLast(with element: Element) {
        precondition(count > 0, "replaceLast on an empty ring")
        storage[(head + count - 1) % storage.count] = element
    }

    /// Removes and returns every element, oldest first.
    @inlinable
    public mutating func removeAll() -> [Element] {
        var out: [Element] = []
        out.reserveCapacity(count)
        while let e = popFirst() { out.append(e) }
        return out
    }

    @usableFromInline
    mutating func grow() {
        var bigger: [Element?] = Array(repeating: nil, count: storage.count * 2)
        for i in 0..<count { bigger[i] = storage[(head + i) % storage.count] }
        storage = bigger
        head = 0
    }
}

extension Ring: Sendable where Element: Sendable {}

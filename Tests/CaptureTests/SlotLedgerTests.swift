import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import Testing

@Suite("Slot ledger: every slot accounted for at every step")
struct SlotLedgerTests {
    @Test("property: random queueing, completions with holders, releases (double ones too) and refused queues keep the invariants",
          arguments: 0..<300)
    func randomised(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed) &+ 0xC0FFEE)
        let slots = 1 + Int(rng.next() % 20), depth = 1 + Int(rng.next() % 6)
        var ledger = SlotLedger(slots: slots, depth: depth)
        var queued: [Int] = []
        var held: [Int: Int] = [:]
        for _ in 0..<400 {
            switch rng.next() % 5 {
            case 0, 1:
                while let s = ledger.nextToQueue() {
                    #expect(!queued.contains(s) && held[s] == nil, "seed \(seed): slot \(s) handed out twice")
                    if rng.next() % 10 == 0 { ledger.queueFailed(s) } else { queued.append(s) }
                }
            case 2:
                guard !queued.isEmpty else { continue }
                let s = queued.remove(at: Int(rng.next() % UInt64(queued.count)))
                let h = Int(rng.next() % 3)
                let completed = ledger.completed(s, holders: h)
                #expect(completed)
                if h > 0 { held[s] = h }
            case 3:
                guard let s = held.keys.sorted().randomElement(using: &rng) else { continue }
                let released = ledger.released(s)
                #expect(released)
                held[s]! -= 1
                if held[s] == 0 { held[s] = nil }
            default:
                // A release of a slot nobody holds (a photo released twice) changes nothing.
                let s = Int(rng.next() % UInt64(slots))
                if held[s] == nil {
                    let released = ledger.released(s)
                    #expect(!released)
                }
                if !queued.contains(s) {
                    let completed = ledger.completed(s, holders: 1)
                    #expect(!completed)
                }
            }
            #expect(ledger.queuedCount == queued.count && ledger.queuedCount <= depth)
            #expect(ledger.heldCount == held.count && ledger.holders == held.values.reduce(0, +))
            #expect(ledger.queuedCount + ledger.heldCount + ledger.spareCount == slots)
        }
    }
}

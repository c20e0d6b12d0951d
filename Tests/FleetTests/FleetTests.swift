import Fleet
import Foundation
import ShutterbugCore
import Testing

/// The fleet's pure parts: the clock's synchronisation as chrony and timesyncd report it, a
/// fleet capture's instant on the camera's clock (or why not), commands and their ids, topics,
/// and Home Assistant's discovery configs.
@Suite("Fleet: clock state, capture plan, commands, topics and Home Assistant discovery (pure)")
struct FleetTests {
    // `chronyc -c tracking` on a synchronised machine (chrony 4.3), and on one with no source.
    static let chronySynced = "C0A80001,ntp.example.org,3,1764180000.123456789,-0.000012345,-0.000010000,0.000020000,-12.345,-0.001,0.050,0.012000000,0.000500000,64.5,Normal\n"
    static let chronyUnsynced = "00000000,,0,0.000000000,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,1.000000000,1.000000000,0.0,Not synchronised\n"

    @Test("chrony's tracking: offset, error bound (|offset| + root delay / 2 + root dispersion), reference and stratum; unsynchronised said so; malformed output named")
    func chrony() throws {
        let s = try ClockSync.chrony(tracking: Self.chronySynced)
        #expect(s.source == .chrony && s.synchronised && s.offsetNs == -12_345 && s.stratum == 3 && s.reference == "ntp.example.org")
        #expect(s.errorBoundNs == Int64(12_345 + 6_000_000 + 500_000), "\(String(describing: s.errorBoundNs))")
        let u = try ClockSync.chrony(tracking: Self.chronyUnsynced)
        #expect(!u.synchronised && u.note?.contains("Not synchronised") == true, "\(u)")
        #expect { try ClockSync.chrony(tracking: "506 Cannot talk to daemon") } throws: { "\($0)".contains("14 expected") }
        let badStratum = Self.chronySynced.replacingOccurrences(of: ",3,", with: ",x,")
        #expect { try ClockSync.chrony(tracking: badStratum) } throws: { "\($0)".contains("stratum") }
        let badOffset = Self.chronySynced.replacingOccurrences(of: "-0.000012345", with: "nan")
        #expect { try ClockSync.chrony(tracking: badOffset) } throws: { "\($0)".contains("system time offset") }
        #expect(ClockSync.timesyncd(show: "Timezone=UTC\nNTP=yes\nNTPSynchronized=yes\n").synchronised)
        let no = ClockSync.timesyncd(show: "NTP=yes\nNTPSynchronized=no\n")
        #expect(!no.synchronised && no.errorBoundNs == nil && no.note?.contains("NTPSynchronized=no") == true)
    }

    @Test("a fleet capture's wall instant becomes the camera's instant through the offset; too soon, too far, an unsynchronised clock, a large error bound and a busy camera are refused with why")
    func plan() throws {
        let now = WallClockTime(nanoseconds: 1_764_180_000_000_000_000)
        let offset = ClockOffset(nanoseconds: 1_764_000_000_000_000_000)
        let synced = try ClockSync.chrony(tracking: Self.chronySynced)
        let at = WallClockTime(nanoseconds: now.nanoseconds + 3_000_000_000)
        let ok = FleetCapturePlan.plan(at: at, now: now, offset: offset, lead: .seconds(2), sync: synced)
        #expect(try ok.get() == SensorTime(nanoseconds: at.nanoseconds - offset.nanoseconds))
        #expect((try? ok.get()).map { $0 + offset } == at, "back to wall time through the same offset")
        func refusal(_ r: Result<SensorTime, FleetCapturePlan.Refusal>) -> String { if case .failure(let e) = r { "\(e)" } else { "accepted" } }
        #expect(refusal(FleetCapturePlan.plan(at: at, now: now, offset: offset, lead: .seconds(5), sync: synced)).contains("less than the phase lock's lead of 5.00 s"))
        let past = WallClockTime(nanoseconds: now.nanoseconds - 1_000_000_000)
        #expect(refusal(FleetCapturePlan.plan(at: past, now: now, offset: offset, lead: .seconds(2), sync: synced)).contains("has passed"))
        #expect(refusal(FleetCapturePlan.plan(at: at, now: now, offset: offset, lead: .seconds(1), limit: .seconds(2), sync: synced)).contains("more than the 2.00 s"))
        let unsynced = try ClockSync.chrony(tracking: Self.chronyUnsynced)
        #expect(refusal(FleetCapturePlan.plan(at: at, now: now, offset: offset, lead: .seconds(2), sync: unsynced)).contains("not synchronised"))
        #expect((try? FleetCapturePlan.plan(at: at, now: now, offset: offset, lead: .seconds(2), sync: unsynced, requireSync: false).get()) != nil, "one machine's own clock")
        #expect(refusal(FleetCapturePlan.plan(at: at, now: now, offset: offset, lead: .seconds(2), sync: synced, maxError: .milliseconds(1))).contains("error bound (6.51 ms)"))
        #expect(refusal(FleetCapturePlan.plan(at: at, now: now, offset: offset, lead: .seconds(2), sync: synced, busy: "timelapse 'roof' takes a slot then")).contains("busy: timelapse 'roof'"))
        #expect(FleetCapturePlan.spread([at, WallClockTime(nanoseconds: at.nanoseconds + 120_000), WallClockTime(nanoseconds: at.nanoseconds - 30_000)]) == .nanoseconds(150_000))
        #expect(FleetCapturePlan.spread([]) == nil)
    }

    @Test("commands decode with their fields; bad ones are refused naming the field and what it accepts; nothing crashes on any payload")
    func commands() throws {
        let c = try FleetCommand.decode(Array(#"{"id": "c-1", "command": "capture", "at": "2026-11-26T18:00:00.250Z", "ev": [-1, 0, 1], "group": "north"}"#.utf8))
        #expect(c.id == "c-1" && c.group == "north")
        guard case .capture(let at, let ev, let exposures, let gain) = c.action else { Issue.record("\(c)"); return }
        #expect(at == WallClockTime(nanoseconds: 1_795_716_000_250_000_000) && ev == [-1, 0, 1] && exposures == nil && gain == nil, "\(String(describing: at))")
        #expect(FleetCommand.instant("2026-11-26T19:00:00.000000001+01:00") == WallClockTime(nanoseconds: 1_795_716_000_000_000_001))
        #expect(FleetCommand.instant("2026-11-26T18:00:00Z") == WallClockTime(nanoseconds: 1_795_716_000_000_000_000))
        for bad in ["2026-11-26T18:00:00.Z", "2026-11-26T18:00:00.1234567890Z", "2026-11-26T18:00:00.5", "2026-11-26 18:00", "18:00", ""] {
            #expect(FleetCommand.instant(bad) == nil, "\(bad)")
        }
        #expect(try FleetCommand.decode(Array(#"{"command": "pause", "job": "roof"}"#.utf8)) == FleetCommand(id: nil, action: .pause(job: "roof"), group: nil))
        let bad: [(String, String)] = [
            ("[1]", "not a JSON object"), ("{}", "'command'"), (#"{"command": "explode"}"#, "not a command"),
            (#"{"command": "pause"}"#, "needs 'job'"), (#"{"command": "capture", "ev": [0, 99]}"#, "'ev' must be"),
            (#"{"command": "capture", "ev": [true]}"#, "'ev' must be"), (#"{"command": "capture", "ev": [0], "exposuresUs": [100]}"#, "not both"),
            (#"{"command": "capture", "at": "tomorrow"}"#, "'at' must be"), (#"{"command": "capture", "gain": 0.5}"#, "'gain'"),
            (#"{"command": "status", "colour": "red"}"#, "'colour' is not a command field"), (#"{"id": "", "command": "status"}"#, "'id'"),
            (#"{"id": 7, "command": "status"}"#, "'id'"),
        ]
        for (payload, says) in bad {
            #expect { try FleetCommand.decode(Array(payload.utf8)) } throws: { "\($0)".contains(says) }
        }
        #expect { try FleetCommand.decode(Array(repeating: UInt8(ascii: " "), count: FleetCommand.maxPayload + 1)) } throws: { "\($0)".contains("more than the") }
        // Random bytes and truncations of a good command: refused or decoded, never a crash.
        var rng = SystemRandomNumberGenerator()
        let good = Array(#"{"id": "c-1", "command": "capture", "at": "2026-11-26T18:00:00Z", "exposuresUs": [1000, 4000], "gain": 2}"#.utf8)
        for n in 0...good.count { _ = try? FleetCommand.decode(Array(good.prefix(n))) }
        for _ in 0..<500 { _ = try? FleetCommand.decode((0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }) }
    }

    @Test("a command id is carried out once: a second delivery is a repeat; the ledger forgets the oldest past its capacity")
    func ledger() {
        var l = CommandLedger(capacity: 3)
        #expect(l.first("a") && !l.first("a") && l.first("b") && l.first("c"))
        #expect(l.first("d") && l.count == 3, "a fourth pushes 'a' out")
        #expect(l.first("a") && !l.first("d"))
    }

    @Test("topics from the prefix and the node; a node name Home Assistant would refuse, or a prefix with a wildcard, is refused")
    func topics() throws {
        let t = try FleetTopics(node: "pi-north_1")
        #expect(t.state == "shutterbug/pi-north_1/state" && t.availability == "shutterbug/pi-north_1/availability" && t.commands == "shutterbug/pi-north_1/cmd")
        #expect(t.fleetCommands == "shutterbug/fleet/cmd" && t.event("capture") == "shutterbug/pi-north_1/event/capture")
        #expect(t.discovery("sensor", "lux") == "homeassistant/sensor/pi-north_1/lux/config" && t.homeAssistantStatus == "homeassistant/status")
        for node in ["", "a/b", "pi north", "pi+1", String(repeating: "x", count: 65)] {
            #expect(throws: ShutterbugError.self, "\(node)") { try FleetTopics(node: node) }
        }
        for prefix in ["a/#", "+", "/x", "x/", ""] {
            #expect(throws: ShutterbugError.self, "\(prefix)") { try FleetTopics(prefix: prefix, node: "pi") }
        }
    }

    @Test("Home Assistant discovery: one device for the node, every entity with a unique id, availability, the device block, units and classes; a switch per job whose payloads decode as commands; a removed job's switch removed")
    func discovery() throws {
        let d = HomeAssistantDiscovery(topics: try FleetTopics(node: "pi1"), model: "imx477", version: "0.3.0")
        let configs = d.configs(jobs: ["roof", "north side"])
        #expect(Set(configs.map(\.payload["unique_id"])).count == configs.count, "unique ids")
        for c in configs {
            #expect(c.topic == "homeassistant/\(c.component)/pi1/\(c.object)/config")
            #expect(c.payload["availability_topic"] == "shutterbug/pi1/availability" && c.payload["payload_available"] == "online")
            guard case .object(let device)? = c.payload["device"] else { Issue.record("no device in \(c.object)"); continue }
            #expect(device["identifiers"] == .array(["shutterbug_pi1"]) && device["model"] == "imx477" && device["sw_version"] == "0.3.0")
            // Every config is JSON that reads back as an object with the same keys.
            let text = JSONValue.object(c.payload).encoded
            let back = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
            #expect(Set(back.keys) == Set(c.payload.keys))
        }
        let byObject = Dictionary(uniqueKeysWithValues: configs.map { ($0.object, $0) })
        #expect(byObject["lux"]?.payload["device_class"] == "illuminance" && byObject["lux"]?.payload["unit_of_measurement"] == "lx")
        #expect(byObject["sensor_temperature"]?.payload["unit_of_measurement"] == "°C" && byObject["captures"]?.payload["state_class"] == "total_increasing")
        #expect(byObject["streaming"]?.component == "binary_sensor" && byObject["picture"]?.payload["topic"] == "shutterbug/pi1/picture")
        // The buttons and the switches send commands the node decodes.
        for object in ["photo", "bracket"] {
            guard case .string(let press)? = byObject[object]?.payload["payload_press"] else { Issue.record("no payload_press in \(object)"); continue }
            #expect(throws: Never.self) { try FleetCommand.decode(Array(press.utf8)) }
        }
        let job = try #require(byObject["job_north_side"], "\(byObject.keys.sorted())")
        guard case .string(let on)? = job.payload["payload_on"], case .string(let off)? = job.payload["payload_off"] else { Issue.record("\(job)"); return }
        #expect(try FleetCommand.decode(Array(on.utf8)).action == .resume(job: "north side"))
        #expect(try FleetCommand.decode(Array(off.utf8)).action == .pause(job: "north side"))
        #expect(d.removals(before: ["roof", "north side"], now: ["roof"]) == ["homeassistant/switch/pi1/job_north_side/config"])
        #expect(d.removals(before: ["roof"], now: ["roof", "new"]).isEmpty)
        // Published again, the same bytes (retained configs do not churn).
        #expect(configs.map { JSONValue.object($0.payload).encoded } == d.configs(jobs: ["roof", "north side"]).map { JSONValue.object($0.payload).encoded })
    }
}

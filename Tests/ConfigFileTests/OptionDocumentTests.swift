import ConfigFile
import Testing

@Suite("Option documents: YAML keys as a command's long options, each at its line")
struct OptionDocumentTests {
    @Test("values become the words a command line carries: text, lists joined with commas, true as a flag, false left out")
    func values() throws {
        let doc = try OptionDocument(text: """
            # a timelapse on the roof
            job: roof
            interval: 30s
            ev: [-2, 0, 2]
            at:
              - 2026-12-01T08:00
              - 2026-12-01T12:00
            virtual-time: true
            no-phase-lock: false
            max-gain: 8
            """, file: "roof.yaml")
        let read = doc.options()
        #expect(read.problems.isEmpty)
        #expect(read.options.map(\.key) == ["job", "interval", "ev", "at", "virtual-time", "no-phase-lock", "max-gain"])
        #expect(read.options.map(\.line) == [2, 3, 4, 5, 8, 9, 10])
        #expect(read.options.flatMap(\.arguments) == ["--job", "roof", "--interval", "30s", "--ev", "-2,0,2", "--at", "2026-12-01T08:00,2026-12-01T12:00",
                                                      "--virtual-time", "--max-gain", "8"])
    }

    @Test("every structural mistake is reported at its line: no value, a mapping or a list of lists as a value, an empty list; a key given twice")
    func structure() throws {
        let doc = try OptionDocument(text: """
            interval:
            ev: {low: -2}
            at: [[1, 2]]
            exposures: []
            """, file: "bad.yaml")
        let problems = doc.options().problems
        #expect(problems.map(\.line) == [1, 2, 3, 4], "\(problems)")
        #expect(problems.map(\.key) == ["interval", "ev", "at", "exposures"])
        #expect(problems[0].message.contains("no value"))
        #expect(problems[1].message.contains("not a mapping"))
        do {
            _ = try OptionDocument(text: "job: a\ninterval: 1s\njob: b\n", file: "twice.yaml")
            Issue.record("a key given twice was accepted")
        } catch {
            #expect(error.description == "twice.yaml:3: job: given twice (first on line 1); give it once")
        }
    }

    @Test("a YAML syntax error, an empty file, a file that is not a mapping and a missing file are each one problem that says where")
    func syntax() {
        #expect(throws: ConfigurationProblems.self) { try OptionDocument(text: "interval: 30s\nev: [-2, 0\n", file: "x.yaml") }
        do {
            _ = try OptionDocument(text: "interval: 30s\n  ev: 1\n", file: "x.yaml")
            Issue.record("indentation error accepted")
        } catch {
            #expect(error.problems.count == 1 && error.problems[0].line == 2 && error.problems[0].message.hasPrefix("not valid YAML"), "\(error)")
        }
        do {
            _ = try OptionDocument(text: "# nothing\n", file: "e.yaml")
            Issue.record("empty file accepted")
        } catch {
            #expect(error.description.contains("empty"))
        }
        let list = try? OptionDocument(text: "- a\n- b\n", file: "l.yaml")
        #expect(list?.options().problems.first?.message.contains("must be a mapping") == true)
        do {
            _ = try OptionDocument(path: "/nonexistent/job.yaml")
            Issue.record("missing file accepted")
        } catch {
            #expect(error.description == "/nonexistent/job.yaml: cannot be read: No such file or directory")
        }
    }
}

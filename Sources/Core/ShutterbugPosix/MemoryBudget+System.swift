#if canImport(Glibc)
import Glibc
#endif
import ShutterbugCore

/// The system's memory budget, read from the environment and `/proc/meminfo`.
extension MemoryBudget {
    /// `SHUTTERBUG_MEMORY_BUDGET_MB` if set; else the CMA pool where the kernel has one (the
    /// Pi 4's buffers come from it), less a quarter for the display and codecs; else half the
    /// memory available now.
    public static func system(environment: [String: String] = Self.environment) -> MemoryBudget {
        if let mb = megabytes("SHUTTERBUG_MEMORY_BUDGET_MB", in: environment) {
            return MemoryBudget(bytes: mb << 20, source: "SHUTTERBUG_MEMORY_BUDGET_MB")
        }
        let info = meminfo()
        if let cma = info["CmaTotal"], cma > 0 {
            return MemoryBudget(bytes: cma * 3 / 4, source: "three quarters of the \(Self.megabytes(cma)) CMA pool")
        }
        if let available = info["MemAvailable"] {
            return MemoryBudget(bytes: available / 2, source: "half the \(Self.megabytes(available)) of memory available")
        }
        return MemoryBudget(bytes: 512 << 20, source: "the default (no /proc/meminfo)")
    }

    /// The most the copies of frames held for zero shutter lag may take (process memory, not
    /// the camera's buffers: on a Pi 4 not the CMA pool): `SHUTTERBUG_POOL_BUDGET_MB`, else half
    /// the memory available.
    public static func pool(environment: [String: String] = Self.environment) -> MemoryBudget {
        if let mb = megabytes("SHUTTERBUG_POOL_BUDGET_MB", in: environment) {
            return MemoryBudget(bytes: mb << 20, source: "SHUTTERBUG_POOL_BUDGET_MB")
        }
        if let available = meminfo()["MemAvailable"] {
            return MemoryBudget(bytes: available / 2, source: "half the \(Self.megabytes(available)) of memory available")
        }
        return MemoryBudget(bytes: 512 << 20, source: "the default (no /proc/meminfo)")
    }

    /// The megabytes accepted for a budget's variable.
    static let megabyteRange = 1...1_048_576

    /// `name`'s value when it is a whole number of MB in `megabyteRange`.
    static func megabytes(_ name: String, in environment: [String: String]) -> Int? {
        environment[name].flatMap { Int($0) }.flatMap { megabyteRange.contains($0) ? $0 : nil }
    }

    /// What is wrong with `SHUTTERBUG_MEMORY_BUDGET_MB` or `SHUTTERBUG_POOL_BUDGET_MB` when set
    /// but unusable (each is then ignored), for a command to say; `nil` when unset or fine.
    public static func environmentProblem(environment: [String: String] = Self.environment) -> String? {
        let problems = [("SHUTTERBUG_MEMORY_BUDGET_MB", { system(environment: [:]) }), ("SHUTTERBUG_POOL_BUDGET_MB", { pool(environment: [:]) })].compactMap { name, fallback -> String? in
            guard let text = environment[name], megabytes(name, in: environment) == nil else { return nil }
            return "\(name) must be a whole number of MB in \(megabyteRange.lowerBound)...\(megabyteRange.upperBound), not '\(text)'; ignored, using \(fallback())"
        }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }

    public static var environment: [String: String] {
        var out: [String: String] = [:]
        for name in ["SHUTTERBUG_MEMORY_BUDGET_MB", "SHUTTERBUG_POOL_BUDGET_MB"] {
            if let v = getenv(name) { out[name] = String(cString: v) }
        }
        return out
    }

    /// /proc/meminfo's fields in bytes.
    static func meminfo() -> [String: Int] {
        guard let f = fopen("/proc/meminfo", "r") else { return [:] }
        defer { fclose(f) }
        var out: [String: Int] = [:]
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), f) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let parts = text.split(whereSeparator: { $0 == ":" || $0 == " " || $0 == "\n" })
            if parts.count >= 2, let kb = Int(parts[1]) { out[String(parts[0])] = kb * 1024 }
        }
        return out
    }
}

// Publishing a complete partial at its destination: durable, atomic, never overwriting; and crash recovery.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
import Darwin
#endif
import HalfTunesCore
import CLinuxFile
import HalfTunesProtocol

public enum PublishError: Error, Equatable {
    case destinationExists(String)
    case partialMissing(String)
    /// A message naming the operation and path, and the errno.
    case io(String, Int32)
}

public enum FilePublisher {
    /// `publish(_:destination:replacing:partialIsDurable:)` for the partial at `partialPath`, opened and checked
    /// here (`OpenPartial.open`).
    public static func publish(partialPath: String, destination: String, replacing: Bool = false,
                               partialIsDurable: Bool = false) throws {
        let partial: OpenPartial
        do {
            partial = try OpenPartial.open(partialPath)
        } catch {
            if error.errno == ENOENT { throw PublishError.partialMissing(partialPath) }
            throw PublishError.io(error.description, error.errno)
        }
        try publish(partial, destination: destination, replacing: replacing, partialIsDurable: partialIsDurable)
    }

    /// Publishes the open partial at `destination`, durably and atomically, never overwriting: fsync the file
    /// (through its descriptor), check that its path still names it (`OpenPartial.checkStillAtPath`: a swapped
    /// partial fails here and nothing is touched), link this very inode at the destination (`/proc/self/fd`,
    /// EEXIST → `.destinationExists`), remove the partial's name if it is still this file's, fsync both
    /// directories. Where hard links are unsupported (EPERM/ENOTSUP/EOPNOTSUPP/EMLINK), or /proc is not
    /// mounted, the name is linked or renamed right after the check. Returns when durable.
    ///
    /// With `replacing`, the partial is renamed over the destination instead (the request asked to overwrite):
    /// atomic, and a symlink at the destination is replaced itself, never followed. A directory is refused.
    /// The rename goes by name right after the check; should the name have been swapped in between, the
    /// destination does not hold this file afterwards and the publish fails.
    ///
    /// `partialIsDurable`: the caller has just fsynced every byte of the partial (a transfer that completed),
    /// so it is not fsynced again.
    public static func publish(_ partial: OpenPartial, destination: String, replacing: Bool = false,
                               partialIsDurable: Bool = false) throws {
        let partialPath = partial.path
        do {
            if !partialIsDurable { try partial.fsync() }
            try partial.checkStillAtPath()
        } catch {
            throw PublishError.io(error.description, error.errno)
        }
        if replacing {
            let e: Int32
            do {
                // A directory is never replaced (renameat would replace an empty one).
                let isDirectory = SafePath.lstatSafely(destination).map { ($0.st_mode & S_IFMT) == S_IFDIR } ?? false
                e = isDirectory ? EISDIR : try SafePath.rename(partialPath, to: destination)
            } catch let error as FileIOError {
                throw PublishError.io(error.description, error.errno)
            }
            guard e == 0 else {
                throw PublishError.io("Cannot move '\(partialPath)' over '\(destination)': " + POSIX.describe(e), e)
            }
            guard let moved = SafePath.lstatSafely(destination), UInt64(moved.st_dev) == partial.device,
                  UInt64(moved.st_ino) == partial.inode else {
                throw PublishError.io("Cannot publish '\(partialPath)': the partial file was replaced while it was "
                    + "moved to '\(destination)'", EPERM)
            }
            try syncDirectories(partialPath, destination)
            return
        }
        // Both names are used relative to their safely reached directories (`SafePath`), each reached once (the
        // usual case, both in one directory, once in all) and fsynced through the same descriptor.
        let linked: (result: Int32, errno: Int32)
        do {
            let sameDirectory = POSIX.directory(of: partialPath) == POSIX.directory(of: destination)
            linked = try SafePath.inParent(of: partialPath) { fromDir, fromName in
                if sameDirectory {
                    return linkAndSync(partial, fromDir, fromName, fromDir, try SafePath.split(destination).name)
                }
                return try SafePath.inParent(of: destination) { toDir, toName in
                    linkAndSync(partial, fromDir, fromName, toDir, toName)
                }
            }
        } catch let e as FileIOError {
            throw PublishError.io(e.description, e.errno)
        }
        switch linked.result {
        case 0:
            return // both directories fsynced
        case 2:
            throw PublishError.io("Cannot fsync the directory of '\(destination)' or '\(partialPath)': "
                + POSIX.describe(linked.errno), linked.errno)
        case 1:
            throw PublishError.io("Cannot remove '\(partialPath)' after linking it to '\(destination)': "
                + POSIX.describe(linked.errno), linked.errno)
        default:
            let e = linked.errno
            switch e {
            case EEXIST:
                throw PublishError.destinationExists(destination)
            case ENOENT:
                throw PublishError.io("Cannot publish '\(partialPath)': the partial file was removed while it was "
                    + "linked to '\(destination)'", e)
            case EPERM, ENOTSUP, EOPNOTSUPP, EMLINK:
                do {
                    try partial.checkStillAtPath()
                } catch {
                    throw PublishError.io(error.description, error.errno)
                }
                try renameWithoutOverwriting(partialPath, destination)
            default:
                throw PublishError.io("Cannot link '\(partialPath)' to '\(destination)': " + POSIX.describe(e), e)
            }
        }
        try syncDirectories(partialPath, destination)
    }

    /// Links the open partial (its inode, whatever its name holds now) to its destination name, never over an
    /// existing file, removes the partial's name if it still names this file, and fsyncs both directories:
    /// (0, 0); (-1, errno) when the link failed, (1, errno) when the unlink did, (2, errno) when an fsync did.
    private static func linkAndSync(_ partial: OpenPartial, _ fromDir: Int32, _ fromName: String, _ toDir: Int32,
                                    _ toName: String) -> (result: Int32, errno: Int32) {
        if htd_link_open_file(partial.fd, toDir, toName) != 0 {
            let e = errno
            // Without /proc the inode cannot be linked by descriptor: its name is, if it still names it.
            guard e == ENOENT, access("/proc/self/fd", F_OK) != 0 else { return (-1, e) }
            guard partial.isNamed(fromName, in: fromDir) else { return (-1, ENOENT) }
            guard linkat(fromDir, fromName, toDir, toName, 0) == 0 else { return (-1, errno) }
        }
        if partial.isNamed(fromName, in: fromDir) {
            guard unlinkat(fromDir, fromName, 0) == 0 || errno == ENOENT else { return (1, errno) }
        }
        // Some filesystems cannot fsync a directory (EINVAL); their metadata is then as durable as it gets.
        for dir in fromDir == toDir ? [toDir] : [toDir, fromDir] where fsync(dir) != 0 && errno != EINVAL {
            return (2, errno)
        }
        return (0, 0)
    }

    /// Idempotent recovery after a crash during publish: partial & destination same inode → unlink partial, fsync
    /// dir → .published; partial missing & destination exists → .published; partial exists & destination missing →
    /// .needsPublish; both exist, different inodes → .conflict; both missing → .lost.
    public static func recover(partialPath: String, destination: String) -> PublishRecovery {
        let partial = POSIX.identity(partialPath)
        let dest = POSIX.identity(destination)
        switch (partial, dest) {
        case let (p?, d?):
            guard p == d else { return .conflict }
            // The link was made, the partial's name not removed yet: remove it while it still names that file.
            _ = try? SafePath.inParent(of: partialPath) { dir, name -> Int32 in
                var st = stat()
                guard fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0, UInt64(st.st_dev) == d.dev,
                      UInt64(st.st_ino) == d.ino else { return -1 }
                return unlinkat(dir, name, 0)
            }
            try? syncDirectories(partialPath, destination)
            return .published
        case (nil, _?):
            return .published
        case (_?, nil):
            return .needsPublish
        case (nil, nil):
            return .lost
        }
    }

    /// Where to publish: `preferred` unless something is there (a file, a directory, a link, even a dangling
    /// one) or it is in `avoiding`; else a free `name (n).ext` next to `destination` (`availableName`) that is
    /// neither in `avoiding` nor reserved. nil: no free name was found (`availableName`).
    public static func publishName(preferred: String, destination: String, avoiding: Set<String>,
                                   isReserved: (String) -> Bool) -> String? {
        if !avoiding.contains(preferred), !POSIX.exists(preferred) { return preferred }
        return availableName(for: destination, isReserved: { avoiding.contains($0) || isReserved($0) })
    }

    /// "name.ext" if it does not exist and is not in `reserved`, else a free "name (n).ext" (the first free one
    /// unless many are taken: `availableName(for:isReserved:)`). Compound extensions stay together: "a.tar.gz" →
    /// "a (1).tar.gz".
    public static func availableName(for destination: String, reserved: Set<String>) -> String? {
        availableName(for: destination, isReserved: reserved.contains)
    }

    /// `availableName(for:reserved:)` with the reserved paths as a test (an index kept elsewhere). The first free
    /// of `name (1).ext` … `name (8).ext`; past them (a user's 100,000 downloads all called `download`), a free one
    /// found by doubling `n` up to `maxCounted` until one is free and then halving back to a free one right after
    /// a taken one: with the taken names contiguous, as they are when they were handed out here, that is the first
    /// free one, in O(log n) looks instead of n. A name freed among many taken may be passed over. When even
    /// `name (maxCounted).ext` is taken (names planted to make the search run on), `randomProbes` random `n` above
    /// it are tried. At most ~70 looks in all, and nil when none of them is free: the search is bounded whatever
    /// the directory holds.
    /// `preferring`: a name to give when it is free and one of those the search gives (`isNumberedName`): the name a
    /// task reserved at create, kept when its first response suggests the same one.
    public static func availableName(for destination: String, isReserved: (String) -> Bool,
                                     preferring preferred: String? = nil) -> String? {
        if !isReserved(destination), !POSIX.exists(destination) { return destination }
        if let preferred, isNumberedName(preferred, of: destination), !isReserved(preferred), !POSIX.exists(preferred) {
            return preferred
        }
        let (dirPrefix, stem, ext) = numberedParts(destination)
        func candidate(_ n: Int) -> String { "\(dirPrefix)\(stem) (\(n))\(ext)" }
        func isFree(_ n: Int) -> Bool {
            let path = candidate(n)
            return !isReserved(path) && !POSIX.exists(path)
        }
        for n in 1...linearProbes where isFree(n) { return candidate(n) }
        var taken = linearProbes, free = 2 * linearProbes
        while !isFree(free) {
            taken = free
            guard free < maxCounted else {
                for _ in 0..<randomProbes {
                    let n = Int.random(in: (maxCounted + 1)...randomCeiling)
                    if isFree(n) { return candidate(n) }
                }
                return nil
            }
            free = min(2 * free, maxCounted)
        }
        while free - taken > 1 {
            let middle = taken + (free - taken) / 2
            if isFree(middle) { free = middle } else { taken = middle }
        }
        return candidate(free)
    }

    /// Whether `path` is one of the names `availableName` gives for `destination` when it is taken:
    /// `name (n).ext` in the same directory, `n` from 1. A task whose name the first response settles keeps such a
    /// name, reserved at create, when the response suggests the same `destination` (the search would find it again
    /// or, past the counted names, draw another random one).
    public static func isNumberedName(_ path: String, of destination: String) -> Bool {
        let (dirPrefix, stem, ext) = numberedParts(destination)
        let head = Array((dirPrefix + stem + " (").utf8), tail = Array((")" + ext).utf8), bytes = Array(path.utf8)
        guard bytes.count > head.count + tail.count, bytes.starts(with: head), bytes.reversed().starts(with: tail.reversed()) else {
            return false
        }
        let digits = bytes[head.count..<(bytes.count - tail.count)]
        return digits.count <= 15 && digits.first != UInt8(ascii: "0")
            && digits.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// The directory (with its `/`), stem and extension of a destination, split at its last `/` byte: as the kernel
    /// reads the path (Swift's characters join a `/` with a combining mark after it).
    private static func numberedParts(_ destination: String) -> (dirPrefix: String, stem: String, ext: String) {
        let split = PathBytes.splitLast(destination)
        let (stem, ext) = splitExtension(split?.after ?? destination)
        return (split.map { $0.before + "/" } ?? "", stem, ext)
    }

    /// How many `name (n).ext` are tried one by one before `availableName` searches.
    static let linearProbes = 8
    /// The highest `n` the search counts to (2^24: far past 100,000 downloads of one name).
    static let maxCounted = 1 << 24
    /// Random `n` tried past `maxCounted`, from `maxCounted + 1` to `randomCeiling`.
    static let randomProbes = 16
    static let randomCeiling = 1 << 48

    static func splitExtension(_ name: String) -> (stem: String, ext: String) {
        let lower = name.lowercased()
        for compound in [".tar.gz", ".tar.bz2", ".tar.xz", ".tar.zst", ".tar.lz", ".tar.z"]
        where lower.hasSuffix(compound) && lower.count > compound.count {
            let cut = name.index(name.endIndex, offsetBy: -compound.count)
            return (String(name[..<cut]), String(name[cut...]))
        }
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex, name.index(after: dot) != name.endIndex else {
            return (name, "")
        }
        return (String(name[..<dot]), String(name[dot...]))
    }

    private static func renameWithoutOverwriting(_ from: String, _ to: String) throws {
        guard !POSIX.exists(to) else { throw PublishError.destinationExists(to) }
        let e: Int32
        do {
            e = try SafePath.rename(from, to: to)
        } catch let error as FileIOError {
            throw PublishError.io(error.description, error.errno)
        }
        guard e == 0 else {
            throw PublishError.io("Cannot rename '\(from)' to '\(to)': " + POSIX.describe(e), e)
        }
    }

    private static func syncDirectories(_ partialPath: String, _ destination: String) throws {
        do {
            try POSIX.fsyncDirectory(containing: destination)
            if POSIX.directory(of: partialPath) != POSIX.directory(of: destination) {
                try POSIX.fsyncDirectory(containing: partialPath)
            }
        } catch let e as FileIOError {
            throw PublishError.io(e.description, e.errno)
        }
    }
}

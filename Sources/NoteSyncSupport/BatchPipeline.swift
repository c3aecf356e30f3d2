import Foundation

/// Work in batches, in order, with the slow parts overlapped: while batch n is processed, batch n + 1 is prepared on
/// another thread (`overlapped`), and the local writes a batch hands to ``Writer`` run on another thread, one at a
/// time, in order. A first sync's commits use it: the next batch's notes are read and staged while the server's disk
/// flushes, and the state database works meanwhile. Every write is finished, and the batch prepared ahead waited for,
/// before ``run(total:batchSize:overlapped:prepare:process:)`` returns or throws.
package enum BatchPipeline {
    /// Runs a batch's local writes: in the background, one at a time, in order of submission.
    package final class Writer {
        private var pending: Pending<Void>?

        /// Waits for the write in flight; throws its error.
        package func finish() throws {
            guard let write = pending else { return }
            pending = nil
            try write.wait()
        }

        /// Runs `write` after the one in flight: on another thread, or here when not `inBackground`.
        package func submit(inBackground: Bool, _ write: @escaping @Sendable () throws -> Void) throws {
            try finish()
            if inBackground { pending = Pending.inBackground(write) } else { try write() }
        }
    }

    /// Prepares and processes the batches of `0..<total` in order. `process` gets the prepared batch, its range,
    /// whether it is the last, and the writer; it returns false to stop (the rest is neither prepared nor
    /// processed). Returns whether every batch was processed.
    package static func run<Prepared: Sendable>(
        total: Int, batchSize: Int, overlapped: Bool,
        prepare: @escaping @Sendable (Range<Int>) throws -> Prepared,
        process: (Prepared, Range<Int>, _ isLast: Bool, Writer) throws -> Bool
    ) throws -> Bool {
        precondition(batchSize > 0)
        let writer = Writer()
        var ahead: Pending<Prepared>?
        defer {
            _ = try? writer.finish()
            _ = try? ahead?.wait()
        }
        func range(after end: Int) -> Range<Int>? { end < total ? end..<min(end + batchSize, total) : nil }
        var current = try range(after: 0).map { ($0, try prepare($0)) }
        while let (batch, prepared) = current {
            current = nil
            let following = range(after: batch.upperBound)
            if overlapped, let following { ahead = Pending.inBackground { try prepare(following) } }
            guard try process(prepared, batch, following == nil, writer) else {
                try writer.finish()
                return false
            }
            if let following {
                if let pending = ahead {
                    ahead = nil
                    current = (following, try pending.wait())
                } else {
                    current = (following, try prepare(following))
                }
            }
        }
        try writer.finish()
        return true
    }
}

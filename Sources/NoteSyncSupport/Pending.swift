import Foundation
import Synchronization

/// A result another thread delivers once: ``wait()`` blocks until ``finish(_:)``.
package final class Pending<Value: Sendable>: Sendable {
    /// Runs `work` on a thread of its own; the caller waits for its value (or error) with ``wait()``.
    package static func inBackground(
        named name: String = "notesync-background",
        _ work: @escaping @Sendable () throws -> Value
    ) -> Pending<Value> {
        let pending = Pending<Value>()
        let thread = Thread { pending.finish(Result { try work() }) }
        thread.name = name
        thread.start()
        return pending
    }

    private let state = Mutex<Result<Value, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    package func finish(_ result: Result<Value, any Error>) {
        state.withLock { $0 = result }
        done.signal()
    }

    package func wait() throws -> Value {
        done.wait()
        return try state.withLock { $0! }.get()
    }
}

/// A value in a class, so that it can be handed on as an object.
package final class Box<Value> {
    package let value: Value
    package init(_ value: Value) { self.value = value }
}

extension Box: Sendable where Value: Sendable {}

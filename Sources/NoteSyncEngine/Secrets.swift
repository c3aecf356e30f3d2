import Foundation
import Logging
import NoteSyncCrypto
import NoteSyncServer
import NoteSyncSupport

/// Where a passphrase comes from: given by file or environment, or asked on the terminal. The use cases ask for one
/// only when an encrypted server needs it, and a plain server never does.
public struct Secrets: Sendable {
    /// A passphrase was given (by file or environment): it may be used ahead, while the folder is walked.
    public var isGiven: Bool
    /// The passphrase of a new encrypted server (asked twice on a terminal).
    public var newPassphrase: @Sendable () throws -> String
    /// The passphrase (or recovery key) of an existing server; the argument says what is asked for.
    public var passphrase: @Sendable (_ purpose: String) throws -> String

    public init(
        isGiven: Bool, newPassphrase: @escaping @Sendable () throws -> String,
        passphrase: @escaping @Sendable (_ purpose: String) throws -> String
    ) {
        self.isGiven = isGiven
        self.newPassphrase = newPassphrase
        self.passphrase = passphrase
    }

    /// No passphrase: a plain server only (an encrypted one is refused when its key is needed).
    public static let none = Secrets(
        isGiven: false,
        newPassphrase: {
            throw NoteSyncError(.usage, path: "", "no passphrase given", fix: "give --passphrase-file or NOTESYNC_PASSPHRASE")
        },
        passphrase: { _ in
            throw NoteSyncError(.usage, path: "", "no passphrase given", fix: "give --passphrase-file or NOTESYNC_PASSPHRASE")
        })

    /// The vault of the encrypted server `store` (the passphrase asked for when not given); nil for a plain server.
    public func vault(of store: ServerStore) throws -> Vault? {
        guard store.marker.isEncrypted else { return nil }
        return try store.unlock(passphrase: try passphrase("passphrase of the server (or its recovery key)"))
    }

    /// The vault of the encrypted server `store` when a passphrase was given, never asked (for work that can be
    /// done in part without the key); nil when none was given, or the server is plain.
    public func givenVault(of store: ServerStore) throws -> Vault? {
        guard isGiven, store.marker.isEncrypted else { return nil }
        return try store.unlock(passphrase: try passphrase("passphrase"))
    }

    /// Opens the server at `root`; an encrypted one with its key (``vault(of:)``).
    public func open(_ root: String, endpoint: String?, device: String, logger: Logger) throws -> ServerStore {
        let store = try ServerStore(root: root, endpoint: endpoint, device: device, logger: logger)
        guard let vault = try vault(of: store) else { return store }
        return try ServerStore(storage: store.storage, device: device, logger: logger, vault: vault)
    }
}

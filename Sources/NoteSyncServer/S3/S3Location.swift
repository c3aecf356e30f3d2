import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// Where an S3 server lives: `s3://BUCKET/PREFIX` on an endpoint (AWS by default, or any S3-compatible service).
public struct S3Location: Sendable, Equatable, CustomStringConvertible {
    /// `http` or `https`.
    public var scheme: String
    /// The endpoint's host (and `:port` when it is not the scheme's default), as signed and sent in `Host`.
    public var host: String
    public var bucket: String
    /// The folder of the server in the bucket: empty, or ending with `/`.
    public var prefix: String
    public var region: String
    /// `/BUCKET/KEY` paths on the endpoint (S3-compatible services, buckets with dots) rather than
    /// `BUCKET.ENDPOINT/KEY` (AWS's virtual-hosted style).
    public var pathStyle: Bool

    /// Parses `s3://BUCKET[/PREFIX]`; `endpoint` (`http(s)://host[:port]`, or `NOTESYNC_S3_ENDPOINT`) names an
    /// S3-compatible service, addressed path-style; without it, AWS S3 in `region`, virtual-hosted.
    public init(url: String, endpoint: String?, region: String) throws {
        guard url.hasPrefix("s3://") else {
            throw NoteSyncError(.usage, path: url, "is not an S3 location", fix: "write it as s3://BUCKET/PREFIX")
        }
        let rest = url.dropFirst(5)
        let bucket = String(rest.prefix { $0 != "/" })
        var prefix = String(rest.dropFirst(bucket.count)).trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        guard Self.isValidBucket(bucket) else {
            throw NoteSyncError(
                .usage, path: url, "\"\(bucket)\" is not a valid bucket name",
                fix: "use 3-63 characters: lowercase letters, digits, '.' and '-', starting and ending with a letter or digit")
        }
        if !prefix.isEmpty { prefix += "/" }
        self.bucket = bucket
        self.prefix = prefix
        self.region = region
        if let endpoint, !endpoint.isEmpty {
            guard let components = URLComponents(string: endpoint), let scheme = components.scheme?.lowercased(),
                scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty,
                components.path.isEmpty || components.path == "/", components.query == nil
            else {
                throw NoteSyncError(
                    .usage, path: endpoint, "is not an S3 endpoint",
                    fix: "give it as http://HOST:PORT or https://HOST (no path), e.g. --endpoint http://127.0.0.1:8333")
            }
            self.scheme = scheme
            self.host = components.port.map { "\(host):\($0)" } ?? host
            self.pathStyle = true
        } else {
            self.scheme = "https"
            self.pathStyle = bucket.contains(".")
            self.host = pathStyle ? "s3.\(region).amazonaws.com" : "\(bucket).s3.\(region).amazonaws.com"
        }
    }

    /// `s3://BUCKET/PREFIX`, as the user gave it (without the endpoint).
    public var description: String { "s3://\(bucket)/\(prefix)" }

    /// The request path of `key` (relative to the prefix), unencoded.
    package func path(of key: String) -> String {
        pathStyle ? "/\(bucket)/\(prefix)\(key)" : "/\(prefix)\(key)"
    }

    /// The request path of the bucket itself (for listings), unencoded.
    var bucketPath: String { pathStyle ? "/\(bucket)" : "/" }

    static func isValidBucket(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (3...63).contains(bytes.count) else { return false }
        let allowed = { (byte: UInt8) in (97...122).contains(byte) || (48...57).contains(byte) || byte == 46 || byte == 45 }
        let edge = { (byte: UInt8) in (97...122).contains(byte) || (48...57).contains(byte) }
        return bytes.allSatisfy(allowed) && edge(bytes.first!) && edge(bytes.last!) && !name.contains("..")
    }
}

/// Credentials and region from where AWS tools keep them: the environment (`AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`/`AWS_DEFAULT_REGION`), else the profile
/// `AWS_PROFILE` (or `default`) of `~/.aws/credentials` (`AWS_SHARED_CREDENTIALS_FILE`) and `~/.aws/config`
/// (`AWS_CONFIG_FILE`). Never stored in the notes folder, never printed.
public enum S3Credentials {
    public static func load(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> (credentials: SigV4Credentials, region: String) {
        let home = environment["HOME"] ?? NSHomeDirectory()
        let profile = environment["AWS_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default"
        let configFile = environment["AWS_CONFIG_FILE"] ?? home + "/.aws/config"
        let config = (try? String(contentsOfFile: configFile, encoding: .utf8)).map(parseINI) ?? [:]
        let configSection = config[profile == "default" ? "default" : "profile \(profile)"] ?? config[profile] ?? [:]
        let region =
            [environment["AWS_REGION"], environment["AWS_DEFAULT_REGION"], configSection["region"]]
            .compactMap { $0 }.first { !$0.isEmpty } ?? "us-east-1"
        if let key = environment["AWS_ACCESS_KEY_ID"], let secret = environment["AWS_SECRET_ACCESS_KEY"], !key.isEmpty,
            !secret.isEmpty
        {
            let token = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
            return (SigV4Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: token), region)
        }
        let file = environment["AWS_SHARED_CREDENTIALS_FILE"] ?? home + "/.aws/credentials"
        let sections = (try? String(contentsOfFile: file, encoding: .utf8)).map(parseINI) ?? [:]
        guard let section = sections[profile], let key = section["aws_access_key_id"],
            let secret = section["aws_secret_access_key"], !key.isEmpty, !secret.isEmpty
        else {
            throw NoteSyncError(
                .usage, path: file,
                "no S3 credentials: no AWS_ACCESS_KEY_ID in the environment and no profile "
                    + "\"\(profile)\" with aws_access_key_id and aws_secret_access_key here",
                fix: "export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add a [\(profile)] section with them to "
                    + "\(file) (AWS_PROFILE chooses another profile)")
        }
        let token = section["aws_session_token"].flatMap { $0.isEmpty ? nil : $0 }
        return (SigV4Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: token), region)
    }

    /// `[section]` → `key = value`, as the AWS files are written (comments with `#` or `;`).
    static func parseINI(_ text: String) -> [String: [String: String]] {
        var sections: [String: [String: String]] = [:]
        var current: String?
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                current = String(line.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
                continue
            }
            guard let current, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            sections[current, default: [:]][key] = value
        }
        return sections
    }
}

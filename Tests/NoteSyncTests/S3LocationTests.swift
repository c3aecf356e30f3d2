import Foundation
import Testing

@testable import NoteSyncAgent
@testable import NoteSyncCrypto
@testable import NoteSyncDiff
@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

/// `s3://BUCKET/PREFIX` and endpoints parsed, and credentials found where AWS tools keep them.
@Suite struct S3LocationTests {
    @Test func locationsAndEndpoints() throws {
        let custom = try S3Location(url: "s3://notes/home/alice/", endpoint: "http://127.0.0.1:8333", region: "eu-west-1")
        #expect(custom.scheme == "http" && custom.host == "127.0.0.1:8333" && custom.pathStyle)
        #expect(custom.prefix == "home/alice/" && custom.path(of: "log/1") == "/notes/home/alice/log/1")
        #expect(custom.description == "s3://notes/home/alice/")
        let aws = try S3Location(url: "s3://notes", endpoint: nil, region: "eu-west-1")
        #expect(aws.scheme == "https" && aws.host == "notes.s3.eu-west-1.amazonaws.com" && !aws.pathStyle)
        #expect(aws.prefix.isEmpty && aws.path(of: "log/1") == "/log/1" && aws.bucketPath == "/")
        let dotted = try S3Location(url: "s3://my.notes/x", endpoint: nil, region: "us-east-1")
        #expect(dotted.pathStyle && dotted.host == "s3.us-east-1.amazonaws.com")
        for bad in ["notes", "s3://No_Such", "s3://ab", "s3://-notes"] {
            #expect(throws: NoteSyncError.self) { try S3Location(url: bad, endpoint: nil, region: "us-east-1") }
        }
        for bad in ["127.0.0.1:8333", "ftp://host", "http://host/path", "http://"] {
            #expect {
                try S3Location(url: "s3://notes", endpoint: bad, region: "us-east-1")
            } throws: { error in
                (error as? NoteSyncError)?.fix?.contains("http://HOST:PORT") == true
            }
        }
    }

    @Test func credentialsFromTheEnvironmentThenTheProfile() throws {
        let dir = try TempDirectory()
        let env = ["HOME": dir.path, "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET", "AWS_REGION": "eu-north-1"]
        let (fromEnv, region) = try S3Credentials.load(environment: env)
        #expect(fromEnv.accessKeyID == "AKID" && fromEnv.secretAccessKey == "SECRET" && region == "eu-north-1")
        // No keys anywhere: the error names the file and the fix, and never a secret.
        let bare = ["HOME": dir.path]
        var fix = ""
        #expect {
            try S3Credentials.load(environment: bare)
        } throws: { error in
            let error = try #require(error as? NoteSyncError)
            fix = error.fix ?? ""
            return error.kind == .usage && error.path == dir.path + "/.aws/credentials" && fix.contains("[default]")
        }
        // Following the fix: a [default] profile (and a region in ~/.aws/config).
        try FileIO.makeDirectories(dir.path + "/.aws")
        try Data("# keys\n[default]\naws_access_key_id = AKFILE\naws_secret_access_key=SFILE\n\n[work]\n".utf8)
            .write(to: URL(fileURLWithPath: dir.path + "/.aws/credentials"))
        try Data("[default]\nregion = ap-south-1\n[profile work]\nregion = us-west-2\n".utf8)
            .write(to: URL(fileURLWithPath: dir.path + "/.aws/config"))
        let (fromFile, fileRegion) = try S3Credentials.load(environment: bare)
        #expect(fromFile.accessKeyID == "AKFILE" && fromFile.secretAccessKey == "SFILE" && fileRegion == "ap-south-1")
        // A profile without keys is named in the error.
        #expect(throws: NoteSyncError.self) { try S3Credentials.load(environment: bare.merging(["AWS_PROFILE": "work"]) { $1 }) }
        #expect(!"\(fromFile)".contains("SFILE"))
    }

    @Test func xmlElementsAndEntities() {
        let xml = "<R><Key>a&amp;b</Key><Key>c&#x20;d&lt;</Key><IsTruncated>false</IsTruncated></R>"
        #expect(S3Client.elements("Key", in: xml) == ["a&b", "c d<"])
        #expect(S3Client.elements("IsTruncated", in: xml) == ["false"])
        #expect(S3Client.elements("Missing", in: xml).isEmpty)
    }
}

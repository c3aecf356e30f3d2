import Crypto
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

/// One request from a published SigV4 example, and the canonical request, string to sign and signature it must give.
struct SigV4Vector: Sendable, CustomTestStringConvertible {
    var name: String
    var credentials = SigV4Tests.suiteCredentials
    var region = "us-east-1"
    var service = "service"
    var host = "example.amazonaws.com"
    var date = SigV4Tests.suiteDate
    var signsContentSHA256 = false
    var method = "GET"
    var path = "/"
    var query: [(name: String, value: String)] = []
    var headers: [(name: String, value: String)] = []
    var body = ""
    var canonicalRequest: String
    var stringToSign: String
    var signature: String

    var testDescription: String { name }

    func signed() -> SigV4SignedRequest {
        let signer = SigV4Signer(
            credentials: credentials, region: region, service: service, signsContentSHA256: signsContentSHA256
        )
        return signer.sign(
            method: method, host: host, path: path, query: query, headers: headers,
            payloadHash: SigV4Signer.payloadHash(of: Data(body.utf8)), date: date
        )
    }
}

/// The SigV4 signer against published examples: AWS's general test suite, as kept in awslabs/aws-c-auth, and the
/// S3 examples of the S3 API reference.
@Suite struct SigV4Tests {
    /// The credentials, region and time of the general suite (aws-c-auth, each vector's `context.json`).
    static let suiteCredentials = SigV4Credentials(
        accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
    )
    /// 2015-08-30T12:36:00Z.
    static let suiteDate = Date(timeIntervalSince1970: 1_440_938_160)
    static let emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    static let unreserved = "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

    /// From https://github.com/awslabs/aws-c-auth, folder `tests/aws-signing-test-suite/v4/<name>/`: the request is
    /// `request.txt`, the expectations are `header-canonical-request.txt`, `header-string-to-sign.txt` and
    /// `header-signature.txt`. All of these sign without `x-amz-content-sha256` except post-x-www-form-urlencoded
    /// (`"sign_body": true`); the two `-unnormalized` ones are signed without path normalisation, as S3 signs.
    static let suiteVectors: [SigV4Vector] = [
        SigV4Vector(
            name: "get-vanilla",
            canonicalRequest: """
                GET
                /

                host:example.amazonaws.com
                x-amz-date:20150830T123600Z

                host;x-amz-date
                \(emptyHash)
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20150830T123600Z
                20150830/us-east-1/service/aws4_request
                bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63
                """,
            signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        ),
        SigV4Vector(
            name: "get-vanilla-query-order-key-case",
            query: [(name: "Param2", value: "value2"), (name: "Param1", value: "value1")],
            canonicalRequest: """
                GET
                /
                Param1=value1&Param2=value2
                host:example.amazonaws.com
                x-amz-date:20150830T123600Z

                host;x-amz-date
                \(emptyHash)
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20150830T123600Z
                20150830/us-east-1/service/aws4_request
                816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0
                """,
            signature: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
        ),
        SigV4Vector(
            name: "get-vanilla-query-unreserved",
            query: [(name: unreserved, value: unreserved)],
            canonicalRequest: """
                GET
                /
                \(unreserved)=\(unreserved)
                host:example.amazonaws.com
                x-amz-date:20150830T123600Z

                host;x-amz-date
                \(emptyHash)
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20150830T123600Z
                20150830/us-east-1/service/aws4_request
                c30d4703d9f799439be92736156d47ccfb2d879ddf56f5befa6d1d6aab979177
                """,
            signature: "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"
        ),
        SigV4Vector(
            name: "get-header-value-trim",
            headers: [(name: "My-Header1", value: " value1"), (name: "My-Header2", value: " \"a   b   c\"")],
            canonicalRequest: """
                GET
                /

                host:example.amazonaws.com
                my-header1:value1
                my-header2:"a b c"
                x-amz-date:20150830T123600Z

                host;my-header1;my-header2;x-amz-date
                \(emptyHash)
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20150830T123600Z
                20150830/us-east-1/service/aws4_request
                a726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c7d68f28605c7
                """,
            signature: "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"
        ),
        SigV4Vector(
            name: "get-header-key-duplicate",
            headers: [
                (name: "My-Header1", value: "value2"), (name: "My-Header1", value: "value2"),
                (name: "My-Header1", value: "value1")
            ],
            canonicalRequest: """
                GET
                /

                host:example.amazonaws.com
                my-header1:value2,value2,value1
                x-amz-date:20150830T123600Z

                host;my-header1;x-amz-date
                \(emptyHash)
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20150830T123600Z
                20150830/us-east-1/service/aws4_request
                dc7f04a3abfde8d472b0ab1a418b741b7c67174dad1551b4117b15527fbe966c
                """,
            signature: "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"
        ),
        SigV4Vector(
            name: "get-utf8",
            path: "/\u{1234}",
            canonicalRequest: """
                GET
                /%E1%88%B4

                host:example.amazonaws.com
                x-amz-date:20150830T123600Z

                host;x-amz-date
                \(emptyHash)
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20150830T123600Z
                20150830/us-east-1/service/aws4_request
                2a0a97d02205e45ce2e994789806b19270cfbbb0921b278ccf58f5249ac42102
                """,
            signature: "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"
        ),
        SigV4Vector(
            name: "get-vanilla-with-session-token",
            credentials: SigV4Credentials(
                accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                sessionToken: "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"
            ),
            canonicalRequest: """
                GET
                /

                host:example.amazonaws.com
                x-amz-date:20150830T123600Z
                x-amz-security-token:6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267

                host;x-amz-date;x-amz-security-token
                \(emptyHash)
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20150830T123600Z
                20150830/us-east-1/service/aws4_request
                067b36aa60031588cea4a4cde1f21215227a047690c72247f1d70b32fbbfad2b
                """,
            signature: "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"
        ),
        SigV4Vector(
            name: "post-x-www-form-urlencoded",
            signsContentSHA256: true,
            method: "POST",
            headers: [
                (name: "Content-Type", value: "application/x-www-form-urlencoded"),
                (name: "Content-Length", value: "13")
            ],
            body: "Param1=value1",
            canonicalRequest: """
                POST
                /

                content-length:13
                content-type:application/x-www-form-urlencoded
                host:example.amazonaws.com
                x-amz-content-sha256:9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e
                x-amz-date:20150830T123600Z

                content-length;content-type;host;x-amz-content-sha256;x-amz-date
                9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20150830T123600Z
                20150830/us-east-1/service/aws4_request
                b1edd1d03544c25390e32085d55b57acc9a3961bb59415ff86c45c3d89d16cfb
                """,
            signature: "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b"
        ),
        SigV4Vector(
            name: "get-space-unnormalized",
            path: "/example space/",
            canonicalRequest: """
                GET
                /example%20space/

                host:example.amazonaws.com
                x-amz-date:20150830T123600Z

                host;x-amz-date
                \(emptyHash)
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20150830T123600Z
                20150830/us-east-1/service/aws4_request
                63ee75631ed7234ae61b5f736dfc7754cdccfedbff4b5128a915706ee9390d86
                """,
            signature: "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"
        ),
        SigV4Vector(
            name: "get-relative-relative-unnormalized",
            path: "/example1/example2/../..",
            canonicalRequest: """
                GET
                /example1/example2/../..

                host:example.amazonaws.com
                x-amz-date:20150830T123600Z

                host;x-amz-date
                \(emptyHash)
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20150830T123600Z
                20150830/us-east-1/service/aws4_request
                76115030c0f3ff06c20fdff5ceb6d5e0b835a1743e00b94fea7c7f381269437b
                """,
            signature: "dc33e0856fd4baca4d7aa2146c38958283844764f38c74252a333df5e613003b"
        )
    ]

    /// The example credentials of the S3 API reference.
    static let s3Credentials = SigV4Credentials(
        accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    )

    /// From the S3 API reference, "Signature Calculations for the Authorization Header: Transferring Payload in a
    /// Single Chunk (AWS Signature Version 4)", section "Examples: Signature Calculations",
    /// https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html (GET Object, PUT Object,
    /// GET Bucket Lifecycle, Get Bucket (List Objects)); 2013-05-24T00:00:00Z, us-east-1, bucket examplebucket.
    static let s3Vectors: [SigV4Vector] = [
        SigV4Vector(
            name: "S3 GET Object",
            credentials: s3Credentials, service: "s3", host: "examplebucket.s3.amazonaws.com",
            date: Date(timeIntervalSince1970: 1_369_353_600), signsContentSHA256: true,
            path: "/test.txt",
            headers: [(name: "Range", value: "bytes=0-9")],
            canonicalRequest: """
                GET
                /test.txt

                host:examplebucket.s3.amazonaws.com
                range:bytes=0-9
                x-amz-content-sha256:\(emptyHash)
                x-amz-date:20130524T000000Z

                host;range;x-amz-content-sha256;x-amz-date
                \(emptyHash)
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20130524T000000Z
                20130524/us-east-1/s3/aws4_request
                7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972
                """,
            signature: "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        ),
        SigV4Vector(
            name: "S3 PUT Object",
            credentials: s3Credentials, service: "s3", host: "examplebucket.s3.amazonaws.com",
            date: Date(timeIntervalSince1970: 1_369_353_600), signsContentSHA256: true,
            method: "PUT",
            path: "/test$file.text",
            headers: [
                (name: "Date", value: "Fri, 24 May 2013 00:00:00 GMT"),
                (name: "x-amz-storage-class", value: "REDUCED_REDUNDANCY")
            ],
            body: "Welcome to Amazon S3.",
            canonicalRequest: """
                PUT
                /test%24file.text

                date:Fri, 24 May 2013 00:00:00 GMT
                host:examplebucket.s3.amazonaws.com
                x-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072
                x-amz-date:20130524T000000Z
                x-amz-storage-class:REDUCED_REDUNDANCY

                date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class
                44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20130524T000000Z
                20130524/us-east-1/s3/aws4_request
                9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d
                """,
            signature: "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
        ),
        SigV4Vector(
            name: "S3 GET Bucket Lifecycle",
            credentials: s3Credentials, service: "s3", host: "examplebucket.s3.amazonaws.com",
            date: Date(timeIntervalSince1970: 1_369_353_600), signsContentSHA256: true,
            query: [(name: "lifecycle", value: "")],
            canonicalRequest: """
                GET
                /
                lifecycle=
                host:examplebucket.s3.amazonaws.com
                x-amz-content-sha256:\(emptyHash)
                x-amz-date:20130524T000000Z

                host;x-amz-content-sha256;x-amz-date
                \(emptyHash)
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20130524T000000Z
                20130524/us-east-1/s3/aws4_request
                9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca
                """,
            signature: "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"
        ),
        SigV4Vector(
            name: "S3 Get Bucket (List Objects)",
            credentials: s3Credentials, service: "s3", host: "examplebucket.s3.amazonaws.com",
            date: Date(timeIntervalSince1970: 1_369_353_600), signsContentSHA256: true,
            query: [(name: "prefix", value: "J"), (name: "max-keys", value: "2")],
            canonicalRequest: """
                GET
                /
                max-keys=2&prefix=J
                host:examplebucket.s3.amazonaws.com
                x-amz-content-sha256:\(emptyHash)
                x-amz-date:20130524T000000Z

                host;x-amz-content-sha256;x-amz-date
                \(emptyHash)
                """,
            stringToSign: """
                AWS4-HMAC-SHA256
                20130524T000000Z
                20130524/us-east-1/s3/aws4_request
                df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7
                """,
            signature: "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
        )
    ]

    @Test(arguments: SigV4Tests.suiteVectors + SigV4Tests.s3Vectors)
    func aPublishedExampleSignsAsPublished(_ vector: SigV4Vector) {
        let signed = vector.signed()
        #expect(signed.canonicalRequest == vector.canonicalRequest)
        #expect(signed.stringToSign == vector.stringToSign)
        #expect(signed.signature == vector.signature)
        let scope = "\(SigV4Signer.timestamp(vector.date).prefix(8))/\(vector.region)/\(vector.service)/aws4_request"
        let lines = vector.canonicalRequest.split(separator: "\n", omittingEmptySubsequences: false)
        let signedHeaders = lines.dropLast().last
        #expect(
            signed.authorization
                == "AWS4-HMAC-SHA256 Credential=\(vector.credentials.accessKeyID)/\(scope), "
                + "SignedHeaders=\(signedHeaders ?? ""), Signature=\(vector.signature)"
        )
        #expect(signed.headersToAdd.last?.name == "authorization")
        #expect(signed.headersToAdd.last?.value == signed.authorization)
    }

    /// The signed request of get-vanilla (aws-c-auth, `tests/aws-signing-test-suite/v4/get-vanilla/`
    /// `header-signed-request.txt`): the `Authorization` header word for word, and the one header added with it.
    @Test func getVanillaAddsTheDateAndTheAuthorization() throws {
        let signed = try #require(Self.suiteVectors.first).signed()
        #expect(
            signed.authorization
                == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                + "SignedHeaders=host;x-amz-date, "
                + "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        )
        #expect(signed.headersToAdd.map(\.name) == ["x-amz-date", "authorization"])
        #expect(signed.headersToAdd.first?.value == "20150830T123600Z")
        #expect(signed.encodedPath == "/" && signed.encodedQuery.isEmpty)
    }

    /// The signing key of the AWS General Reference, "Examples of how to derive a signing key for Signature
    /// Version 4" (https://docs.aws.amazon.com/general/latest/gr/signature-v4-examples.html): 2012-02-15,
    /// us-east-1, iam.
    @Test func theSigningKeyIsDerivedAsAWSShowsIt() {
        let signer = SigV4Signer(credentials: Self.suiteCredentials, region: "us-east-1", service: "iam")
        let key = signer.signingKey(dateStamp: "20120215").withUnsafeBytes { SigV4Signer.hex(Array($0)) }
        #expect(key == "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d")
    }

    /// The canonical paths of the suite's path vectors (aws-c-auth, `tests/aws-signing-test-suite/v4/`): each
    /// request path, and the path line of `header-canonical-request.txt` in the `-normalized` folder and in the
    /// `-unnormalized` one.
    @Test func pathsAreNormalisedOnlyWhenAsked() {
        let cases: [(path: String, normalized: String, unnormalized: String)] = [
            ("/example/..", "/", "/example/.."),  // get-relative-*
            ("/example1/example2/../..", "/", "/example1/example2/../.."),  // get-relative-relative-*
            ("/./", "/", "/./"),  // get-slash-dot-slash-*
            ("//", "/", "//"),  // get-slash-*
            ("/./example", "/example", "/./example"),  // get-slash-pointless-dot-*
            ("//example//", "/example/", "//example//"),  // get-slashes-*
            ("/example space/", "/example%20space/", "/example%20space/")  // get-space-*
        ]
        for (path, normalized, unnormalized) in cases {
            #expect(SigV4Signer.canonicalPath(path, normalizing: true) == normalized, "\(path)")
            #expect(SigV4Signer.canonicalPath(path, normalizing: false) == unnormalized, "\(path)")
        }
        #expect(SigV4Signer.canonicalPath("", normalizing: false) == "/")
        #expect(SigV4Signer.canonicalPath("test.txt", normalizing: false) == "/test.txt")
    }

    /// An S3 key is encoded once: a `%` in it is a character of the key, written `%25`, and nothing is decoded.
    @Test func anS3KeyIsEncodedOnceSegmentBySegment() {
        let path = "/notes/a b+c%20d/\u{E9}t\u{E9} (1)~x_y-z.md"
        #expect(
            SigV4Signer.canonicalPath(path, normalizing: false)
                == "/notes/a%20b%2Bc%2520d/%C3%A9t%C3%A9%20%281%29~x_y-z.md"
        )
        #expect(SigV4Signer.uriEncode("a/b=c&d") == "a%2Fb%3Dc%26d")
        #expect(SigV4Signer.uriEncode("a/b", keepingSlashes: true) == "a/b")
        #expect(SigV4Signer.uriEncode("*") == "%2A")
    }

    /// ListObjectsV2's parameters: sorted by encoded name, then by value; slashes and `=` encoded in values.
    @Test func theQueryIsEncodedAndSorted() {
        let query = SigV4Signer.canonicalQuery([
            (name: "prefix", value: "notes/a b"), (name: "list-type", value: "2"),
            (name: "continuation-token", value: "1/x+y=="), (name: "max-keys", value: "1000"),
            (name: "b", value: "2"), (name: "b", value: "10"), (name: "B", value: "")
        ])
        #expect(
            query == "B=&b=10&b=2&continuation-token=1%2Fx%2By%3D%3D&list-type=2&max-keys=1000&prefix=notes%2Fa%20b"
        )
        #expect(SigV4Signer.canonicalQuery([]).isEmpty)
    }

    /// Header values: trimmed, inner whitespace made one space. The folded value is get-header-value-multiline's
    /// (aws-c-auth, `tests/aws-signing-test-suite/v4/get-header-value-multiline/`).
    @Test func headerValuesAreTrimmedAndTheirSpacesCollapsed() {
        #expect(SigV4Signer.canonicalHeaderValue("value1\n  value2\n     value3") == "value1 value2 value3")
        #expect(SigV4Signer.canonicalHeaderValue(" \t a \t  b  ") == "a b")
        #expect(SigV4Signer.canonicalHeaderValue("").isEmpty)
        let (lines, names) = SigV4Signer.canonicalHeaders([
            (name: "X-B", value: "2"), (name: "x-a", value: " 1 "), (name: "X-A", value: "3")
        ])
        #expect(lines == "x-a:1,3\nx-b:2\n")
        #expect(names == "x-a;x-b")
    }

    /// A PutObject that must not overwrite, with session credentials: every header S3 needs is added and signed,
    /// and the caller's copies of the signer's own headers are replaced.
    @Test func anS3PutSignsTheConditionTheTokenAndThePayloadHash() {
        let credentials = SigV4Credentials(
            accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "secret", sessionToken: "token/+="
        )
        let signer = SigV4Signer(credentials: credentials, region: "eu-central-1")
        let body = Data("# A note\n".utf8)
        let signed = signer.sign(
            method: "PUT", host: "minio.local:9000", path: "/bucket/notes/a b.md",
            headers: [
                (name: "If-None-Match", value: "*"), (name: "Content-Length", value: "\(body.count)"),
                (name: "X-Amz-Date", value: "19990101T000000Z"), (name: "Host", value: "elsewhere")
            ],
            payloadHash: SigV4Signer.payloadHash(of: body), date: Date(timeIntervalSince1970: 1_700_000_000)
        )
        let hash = SigV4Signer.hex(SHA256.hash(data: body))
        #expect(signed.encodedPath == "/bucket/notes/a%20b.md")
        #expect(
            signed.signedHeaders
                == "content-length;host;if-none-match;x-amz-content-sha256;x-amz-date;x-amz-security-token"
        )
        #expect(
            signed.canonicalRequest == """
                PUT
                /bucket/notes/a%20b.md

                content-length:9
                host:minio.local:9000
                if-none-match:*
                x-amz-content-sha256:\(hash)
                x-amz-date:20231114T221320Z
                x-amz-security-token:token/+=

                \(signed.signedHeaders)
                \(hash)
                """
        )
        #expect(
            signed.headersToAdd.map(\.name)
                == ["x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "authorization"]
        )
        #expect(signed.headersToAdd.map(\.value).dropLast() == ["20231114T221320Z", hash, "token/+="])
        let credential = "Credential=AKIAIOSFODNN7EXAMPLE/20231114/eu-central-1/s3/aws4_request, "
        #expect(signed.authorization.hasPrefix("AWS4-HMAC-SHA256 \(credential)"))

        let unsigned = signer.sign(
            method: "GET", host: "minio.local:9000", path: "/bucket/a", payloadHash: SigV4Signer.unsignedPayload,
            date: Date(timeIntervalSince1970: 1_700_000_000)
        )
        #expect(unsigned.canonicalRequest.hasSuffix("\nUNSIGNED-PAYLOAD"))
        #expect(unsigned.headersToAdd.contains { $0.name == "x-amz-content-sha256" && $0.value == "UNSIGNED-PAYLOAD" })
    }

    /// Every input is part of the signature: change any one, even one character of the secret, and it changes.
    @Test func anyChangeChangesTheSignature() throws {
        let vector = try #require(Self.s3Vectors.first)
        let base = vector.signed().signature
        var changes: [SigV4Vector] = []
        var secret = vector
        secret.credentials.secretAccessKey = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEx"
        changes.append(secret)
        var region = vector
        region.region = "us-east-2"
        changes.append(region)
        var date = vector
        date.date = vector.date.addingTimeInterval(1)
        changes.append(date)
        var path = vector
        path.path = "/test.txT"
        changes.append(path)
        var header = vector
        header.headers = [(name: "Range", value: "bytes=0-8")]
        changes.append(header)
        var body = vector
        body.body = " "
        changes.append(body)
        for change in changes {
            #expect(change.signed().signature != base)
        }
    }

    /// The signing key is derived once a day and kept; a copy of the signer with another secret, region or day
    /// derives its own, never the kept one.
    @Test func theKeptSigningKeyIsOnlyUsedForWhatItWasDerivedFrom() throws {
        let vector = try #require(Self.s3Vectors.first)
        let signer = SigV4Signer(credentials: vector.credentials, region: "us-east-1")
        func derived(_ signer: SigV4Signer, _ day: String) -> SymmetricKey {
            SigV4Signer.deriveSigningKey(
                secret: signer.credentials.secretAccessKey, dateStamp: day, region: signer.region, service: signer.service)
        }
        #expect(signer.signingKey(dateStamp: "20150830") == derived(signer, "20150830"))
        #expect(signer.signingKey(dateStamp: "20150830") == derived(signer, "20150830"))
        #expect(signer.signingKey(dateStamp: "20150831") == derived(signer, "20150831"))
        var other = signer
        other.credentials.secretAccessKey += "x"
        #expect(other.signingKey(dateStamp: "20150831") == derived(other, "20150831"))
        #expect(signer.signingKey(dateStamp: "20150831") == derived(signer, "20150831"))
        var elsewhere = signer
        elsewhere.region = "eu-west-1"
        #expect(elsewhere.signingKey(dateStamp: "20150831") == derived(elsewhere, "20150831"))
        #expect(signer.signingKey(dateStamp: "20150831") != elsewhere.signingKey(dateStamp: "20150831"))
        for vector in Self.s3Vectors {
            #expect(vector.signed().signature == vector.signed().signature)
        }
    }

    /// The timestamp is UTC from the epoch, whatever the process's time zone and locale.
    @Test func theTimestampIsUTCFromTheEpoch() {
        #expect(SigV4Signer.timestamp(Self.suiteDate) == "20150830T123600Z")
        #expect(SigV4Signer.timestamp(Date(timeIntervalSince1970: 0)) == "19700101T000000Z")
        #expect(SigV4Signer.timestamp(Date(timeIntervalSince1970: -1)) == "19691231T235959Z")
        #expect(SigV4Signer.timestamp(Date(timeIntervalSince1970: 1_456_790_399.999)) == "20160229T235959Z")
        #expect(SigV4Signer.timestamp(Date(timeIntervalSince1970: 951_868_800)) == "20000301T000000Z")
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            // 1900-01-01 to 2200-01-01.
            let seconds = Int.random(in: -2_208_988_800...7_258_118_400, using: &generator)
            let date = Date(timeIntervalSince1970: Double(seconds))
            let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
            let expected = [
                SigV4Signer.padded(parts.year!, 4), SigV4Signer.padded(parts.month!, 2),
                SigV4Signer.padded(parts.day!, 2),
                "T", SigV4Signer.padded(parts.hour!, 2), SigV4Signer.padded(parts.minute!, 2),
                SigV4Signer.padded(parts.second!, 2), "Z"
            ].joined()
            #expect(SigV4Signer.timestamp(date) == expected, "\(date.timeIntervalSince1970)")
        }
    }

    /// The secret and the session token never appear when credentials or a signer are printed, dumped or logged.
    @Test func theSecretIsNeverPrinted() {
        let credentials = SigV4Credentials(
            accessKeyID: "AKIDEXAMPLE", secretAccessKey: "very-secret-key", sessionToken: "very-secret-token"
        )
        let signer = SigV4Signer(credentials: credentials, region: "us-east-1")
        // After signing, when the signer holds the day's signing key.
        _ = signer.sign(method: "GET", host: "example.com", path: "/", payloadHash: SigV4Signer.emptyPayloadHash, date: Self.suiteDate)
        var dumped = ""
        dump(credentials, to: &dumped)
        dump(signer, to: &dumped)
        let printed = [
            "\(credentials)", String(reflecting: credentials), "\(signer)", String(reflecting: signer), dumped,
            "\([credentials])", "\(Optional(credentials) as Any)"
        ]
        for text in printed {
            #expect(!text.contains("very-secret"), "\(text)")
            #expect(text.contains("AKIDEXAMPLE"), "\(text)")
        }
        #expect("\(credentials)".contains("<redacted>"))
        let longTerm = SigV4Credentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "very-secret-key")
        #expect("\(longTerm)".contains("sessionToken: none"))
    }
}

import AsyncHTTPClient
import Foundation
import NIOCore
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

/// What the S3 client reads from answers without a service: dates, and which failures mean a request never left.
@Suite struct S3ClientTests {
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// RFC 1123 as a formatter writes it, for seconds from 1900 to 2200: parsed back to the same second.
    @Test func lastModifiedIsReadAsAFormatterWouldRead() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let seconds = Int64.random(in: -2_208_988_800...7_258_118_400, using: &generator)
            let text = formatter.string(from: Date(timeIntervalSince1970: Double(seconds)))
            #expect(S3Client.httpDate(text) == seconds * 1_000_000_000, "\(text)")
        }
        #expect(S3Client.httpDate("Wed, 21 Oct 2015 07:28:00 GMT") == Int64(1_445_412_480) * 1_000_000_000)
        #expect(S3Client.httpDate("Thu, 29 Feb 2024 23:59:59 GMT") == Int64(1_709_251_199) * 1_000_000_000)
    }

    /// A listing's ISO 8601 times, with no fraction or with 3, 6 or 9 digits of one.
    @Test func listingTimesKeepTheirFractions() {
        #expect(S3Client.isoDate("2009-10-12T17:50:30Z") == Int64(1_255_369_830) * 1_000_000_000)
        #expect(S3Client.isoDate("2009-10-12T17:50:30.000Z") == Int64(1_255_369_830) * 1_000_000_000)
        #expect(S3Client.isoDate("2009-10-12T17:50:30.123Z") == Int64(1_255_369_830) * 1_000_000_000 + 123_000_000)
        #expect(S3Client.isoDate("2009-10-12T17:50:30.123456Z") == Int64(1_255_369_830) * 1_000_000_000 + 123_456_000)
        #expect(S3Client.isoDate("2009-10-12T17:50:30.123456789Z") == Int64(1_255_369_830) * 1_000_000_000 + 123_456_789)
        #expect(S3Client.isoDate("1970-01-01T00:00:00Z") == 0)
        #expect(S3Client.isoDate("1969-12-31T23:59:59Z") == Int64(-1_000_000_000))
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let seconds = Int.random(in: -2_208_988_800...7_258_118_400, using: &generator)
            let parts = Self.utc.dateComponents(
                [.year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSince1970: Double(seconds)))
            let text = String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d.000Z", parts.year!, parts.month!, parts.day!, parts.hour!,
                parts.minute!, parts.second!)
            #expect(S3Client.isoDate(text) == Int64(seconds) * 1_000_000_000, "\(text)")
        }
    }

    /// Anything else is no date, never a wrong one.
    @Test func malformedDatesAreNone() {
        let http = [
            "", "Wed, 21 Oct 2015 07:28:00 UTC", "Wed, 21 Okt 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:28 GMT",
            "Wed, 32 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 24:28:00 GMT", "Wed 21 Oct 2015 07:28:00 GMT ",
            "Wed, 2a Oct 2015 07:28:00 GMT", "2015-10-21T07:28:00Z"
        ]
        for text in http { #expect(S3Client.httpDate(text) == nil, "\(text)") }
        let iso = [
            "", "2009-10-12T17:50:30", "2009-10-12 17:50:30Z", "2009-13-12T17:50:30Z", "2009-10-12T17:50:30.Z",
            "2009-10-12T17:50:30.1234567890Z", "2009-10-12T17:50:30+01:00", "2009-1O-12T17:50:30Z",
            "Wed, 21 Oct 2015 07:28:00 GMT"
        ]
        for text in iso { #expect(S3Client.isoDate(text) == nil, "\(text)") }
    }

    /// The days-from-date inverse agrees with the date-from-days the signer uses, across four centuries and more.
    @Test func daysAndDatesAreInverses() {
        for day in stride(from: -80_000, through: 120_000, by: 7) {
            let date = SigV4Signer.civilDate(daysSince1970: day)
            #expect(SigV4Signer.daysSince1970(year: date.year, month: date.month, day: date.day) == day)
        }
    }

    /// Only a connection that was never made means the request was not sent, so a claim need not be read back; a
    /// reset or a read timeout may come after the service acted on it.
    @Test func onlyAConnectionNeverMadeIsUnsent() {
        #expect(S3Client.neverConnected(IOError(errnoCode: ECONNREFUSED, reason: "connect")))
        #expect(S3Client.neverConnected(IOError(errnoCode: ENETUNREACH, reason: "connect")))
        #expect(S3Client.neverConnected(IOError(errnoCode: EHOSTUNREACH, reason: "connect")))
        #expect(S3Client.neverConnected(ChannelError.connectTimeout(.seconds(5))))
        #expect(S3Client.neverConnected(HTTPClientError.connectTimeout))
        #expect(!S3Client.neverConnected(IOError(errnoCode: ECONNRESET, reason: "read")))
        #expect(!S3Client.neverConnected(IOError(errnoCode: EPIPE, reason: "write")))
        #expect(!S3Client.neverConnected(HTTPClientError.readTimeout))
        #expect(!S3Client.neverConnected(HTTPClientError.remoteConnectionClosed))
        #expect(!S3Client.neverConnected(ChannelError.eof))
        #expect(!S3Client.neverConnected(CancellationError()))
    }
}

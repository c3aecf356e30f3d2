import Foundation
import NoteSyncAgent
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

/// Fuzzes `RecordName`, the one path validator: whatever it accepts must be safe to use as a path under the
/// notes folder and must be the only spelling of that name.
enum NameFuzz {
    static func check(_ input: Data) throws(FuzzViolation) {
        let text = String(decoding: input, as: UTF8.self)
        let stdlibNFC = String(decoding: text._nfcCodeUnits, as: UTF8.self)
        let forms = [
            text,
            RecordName.nfc(text),
            text.precomposedStringWithCanonicalMapping,
            text.decomposedStringWithCanonicalMapping,
            stdlibNFC
        ]
        var accepted: [RecordName] = []
        for form in forms {
            let name: RecordName
            do {
                name = try RecordName(validating: form)
            } catch {
                try FuzzViolation.require(
                    FuzzViolation.isPrintable(error.description),
                    "the refusal of \(FuzzViolation.show(form)) prints a control character: \(error.description)")
                continue
            }
            try checkAccepted(name, from: form)
            accepted.append(name)
        }
        // The spellings are canonically equivalent, so equal as `RecordName`s: only one may be a valid name,
        // or two files on disk would be one record.
        for name in accepted {
            try FuzzViolation.require(
                name.string.utf8.elementsEqual(accepted[0].string.utf8),
                "two spellings of one name are both valid: \(FuzzViolation.show(name.string)) and "
                    + FuzzViolation.show(accepted[0].string))
        }
        // The scanner normalizes with `RecordName.nfc` and then validates: the two must agree on what NFC is.
        let normalized = RecordName.nfc(text)
        do {
            _ = try RecordName(validating: normalized)
        } catch {
            try FuzzViolation.require(
                !error.reason.contains("NFC"),
                "RecordName.nfc gives \(FuzzViolation.show(normalized)), which the validator calls not NFC")
        }
    }

    /// Every property a valid name must have, checked independently of the validator's own code.
    static func checkAccepted(_ name: RecordName, from form: String) throws(FuzzViolation) {
        let string = name.string
        let shown = FuzzViolation.show(string)
        try FuzzViolation.require(string.utf8.elementsEqual(form.utf8), "validation changed \(shown)")
        try FuzzViolation.require(!string.isEmpty, "the empty name was accepted")
        try FuzzViolation.require(
            string.utf8.count <= RecordName.maxNameBytes, "\(shown) is longer than \(RecordName.maxNameBytes) bytes")
        try FuzzViolation.require(string.utf8.first != UInt8(ascii: "/"), "absolute \(shown) was accepted")
        let components = FuzzTarget.components(string, omittingEmpty: false)
        try FuzzViolation.require(
            components.count == name.components.count
                && zip(components, name.components).allSatisfy { $0.utf8.elementsEqual($1.utf8) },
            "RecordName.components splits \(shown) into \(name.components), not at each / byte")
        for component in components {
            try FuzzViolation.require(!component.isEmpty, "\(shown) has an empty component")
            try FuzzViolation.require(component != "." && component != "..", "\(shown) has a . or .. component")
            try FuzzViolation.require(
                component.utf8.count <= RecordName.maxComponentBytes,
                "\(shown) has a component longer than \(RecordName.maxComponentBytes) bytes")
            try FuzzViolation.require(
                !ReservedNames.isAgentOwned(component), "\(shown) names the agent's own state or temp files")
        }
        for scalar in string.unicodeScalars {
            try FuzzViolation.require(
                scalar.properties.generalCategory != .control, "\(shown) contains a control character")
            try FuzzViolation.require(scalar != "\u{FFFD}", "\(shown) contains U+FFFD")
        }
        // NFC as the standard library computes it: the form `String ==`, and so `RecordName ==`, compares.
        try FuzzViolation.require(string.utf8.elementsEqual(string._nfcCodeUnits), "\(shown) is not in NFC")
        try FuzzViolation.require(
            RecordName.nfc(string).utf8.elementsEqual(string.utf8), "RecordName.nfc changes the valid name \(shown)")
        try FuzzViolation.require(FuzzViolation.isPrintable(name.description), "\(shown) prints a control character")

        let decoded: RecordName
        do {
            decoded = try JSONDecoder().decode(RecordName.self, from: JSONEncoder().encode(name))
        } catch {
            throw FuzzViolation(message: "\(shown) does not survive JSON: \(error)")
        }
        try FuzzViolation.require(decoded.string.utf8.elementsEqual(string.utf8), "\(shown) changes through JSON")
    }
}

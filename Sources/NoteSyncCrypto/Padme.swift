import NoteSyncSupport

/// Padmé (Nikitin et al., "Reducing Metadata Leakage from Encrypted Files and Communication with PURBs", PETS 2019):
/// the length `length` is padded to, so that a sealed file's size says little about its content.
///
/// The length keeps its top `floor(log2 E) + 1` bits, where E = floor(log2 length), and the bits below are rounded
/// up: at most 11.7 % more bytes (at 129), under 6.25 % from 256 on, and the padded size leaks O(log log length) bits.
public func padme(_ length: Int) -> Int {
    precondition(length >= 0, "a negative length has no padding")
    guard length > 0 else { return 0 }
    let exponent = Int.bitWidth - 1 - length.leadingZeroBitCount
    let kept = Int.bitWidth - exponent.leadingZeroBitCount
    let mask = (1 << (exponent - kept)) - 1
    return (length + mask) & ~mask
}

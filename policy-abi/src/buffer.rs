//! How the ABI returns a buffer from an export: its address and length in one `i64`.

/// Packs an output buffer's address and length as the ABI returns them.
pub fn pack(ptr: u32, len: u32) -> i64 {
    ((u64::from(ptr) << 32) | u64::from(len)) as i64
}

/// Splits what [`pack`] packed.
pub fn unpack(packed: i64) -> (u32, u32) {
    let packed = packed as u64;
    ((packed >> 32) as u32, packed as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_keeps_address_and_length() {
        assert_eq!(unpack(pack(0x0010_2000, 51_200)), (0x0010_2000, 51_200));
        assert_eq!(unpack(pack(u32::MAX, u32::MAX)), (u32::MAX, u32::MAX));
    }
}

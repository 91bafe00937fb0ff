//! decimal128 (IEEE 754-2008, binary integer decimal) as an order-preserving sort key.
//!
//! The bson crate exposes a decimal128 only as its 16 bytes, so the value is decoded here:
//! sign, 14-bit exponent (bias 6176) and a coefficient below 10^34; non-canonical coefficients
//! read as zero, as the standard requires.
//!
//! Key layout (what `encoding` writes after the bracket tag, and what `compare` compares):
//! one class byte — NaN `0`, -inf `1`, negative `2`, zero `3`, positive `4`, +inf `5` — then,
//! for negative and positive values only, 18 bytes: the adjusted exponent `E` (exponent of the
//! leading digit) as a sign-flipped big-endian i16, and the coefficient scaled to 34 digits
//! (`m = c * 10^(34 - digits(c))`) as a big-endian u128. Trailing zeros of the coefficient are
//! stripped first, so `1.0` and `1.00` share a key. For a positive value (E, m) orders by
//! magnitude; a negative value's 18 bytes are inverted so that a larger magnitude sorts lower.
//! The class byte fixes the length, so the key is self-delimiting.

use bson::Decimal128;

use super::{Result, ValueError};

const BIAS: i32 = 6176;
const MAX_BIASED_EXP: i32 = 12287;
const MAX_COEFF: u128 = 10u128.pow(34) - 1;
const DIGITS: u32 = 34;

const NAN: u8 = 0;
const NEG_INF: u8 = 1;
const NEG: u8 = 2;
const ZERO: u8 = 3;
const POS: u8 = 4;
const POS_INF: u8 = 5;

/// A decimal128 sort key: 1 or 19 meaningful bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecimalKey {
    bytes: [u8; 19],
    len: usize,
}

impl DecimalKey {
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The sort key of a decimal128.
pub(crate) fn sort_key(d: Decimal128) -> DecimalKey {
    let x = u128::from_le_bytes(d.bytes());
    let negative = x >> 127 == 1;
    let mut key = DecimalKey {
        bytes: [0; 19],
        len: 1,
    };
    let (exp, coeff) = if (x >> 125) & 0b11 == 0b11 {
        match (x >> 122) & 0b1_1111 {
            0b1_1111 => {
                key.bytes[0] = NAN;
                return key;
            }
            0b1_1110 => {
                key.bytes[0] = if negative { NEG_INF } else { POS_INF };
                return key;
            }
            // Coefficient 0b100... >= 2^113 > MAX_COEFF: non-canonical, reads as zero.
            _ => (0, 0),
        }
    } else {
        let exp = ((x >> 113) & 0x3FFF) as i32;
        let coeff = x & ((1u128 << 113) - 1);
        (exp, if coeff > MAX_COEFF { 0 } else { coeff })
    };
    if coeff == 0 {
        key.bytes[0] = ZERO;
        return key;
    }
    let (c, q) = strip_zeros(coeff, exp - BIAS);
    let digits = digit_count(c);
    let adjusted = q + digits as i32 - 1; // within [-6176, 6177]: fits an i16
    let m = c * 10u128.pow(DIGITS - digits);
    key.bytes[0] = if negative { NEG } else { POS };
    key.bytes[1..3].copy_from_slice(&((adjusted as i16 as u16) ^ 0x8000).to_be_bytes());
    key.bytes[3..19].copy_from_slice(&m.to_be_bytes());
    if negative {
        for b in &mut key.bytes[1..19] {
            *b = !*b;
        }
    }
    key.len = 19;
    key
}

/// Reads a key written by [`sort_key`] back into a decimal128 (normalised: trailing zeros
/// stripped, so `1.00` comes back as `1`; zeros come back as `0E0`, NaN as the quiet NaN).
/// Returns the value and the number of bytes consumed.
pub(crate) fn from_key(bytes: &[u8], offset: usize) -> Result<(Decimal128, usize)> {
    let err = |reason| ValueError::Decode { offset, reason };
    let class = *bytes.first().ok_or(err("truncated decimal"))?;
    let x: u128 = match class {
        NAN => 0b1_1111 << 122,
        NEG_INF => (1 << 127) | (0b1_1110 << 122),
        POS_INF => 0b1_1110 << 122,
        ZERO => (BIAS as u128) << 113,
        NEG | POS => {
            let mut body: [u8; 18] = bytes
                .get(1..19)
                .and_then(|b| b.try_into().ok())
                .ok_or(err("truncated decimal"))?;
            if class == NEG {
                for b in &mut body {
                    *b = !*b;
                }
            }
            let adjusted = i32::from((u16::from_be_bytes([body[0], body[1]]) ^ 0x8000) as i16);
            let mut m_bytes = [0u8; 16];
            m_bytes.copy_from_slice(&body[2..18]);
            let m = u128::from_be_bytes(m_bytes);
            if m == 0 || m > MAX_COEFF {
                return Err(err("bad decimal coefficient"));
            }
            let (mut c, _) = strip_zeros(m, 0);
            let digits = digit_count(c);
            let mut biased = adjusted - digits as i32 + 1 + BIAS;
            if biased > MAX_BIASED_EXP {
                // Pad the coefficient back with zeros to bring the exponent into range.
                let pad = u32::try_from(biased - MAX_BIASED_EXP).map_err(|_| err("bad exponent"))?;
                if digits + pad > DIGITS {
                    return Err(err("decimal exponent out of range"));
                }
                c *= 10u128.pow(pad);
                biased = MAX_BIASED_EXP;
            }
            let biased = u128::try_from(biased).map_err(|_| err("decimal exponent out of range"))?;
            (u128::from(class == NEG) << 127) | (biased << 113) | c
        }
        _ => return Err(err("bad decimal class")),
    };
    let len = if class == NEG || class == POS { 19 } else { 1 };
    Ok((Decimal128::from_bytes(x.to_le_bytes()), len))
}

fn strip_zeros(mut c: u128, mut q: i32) -> (u128, i32) {
    while c != 0 && c.is_multiple_of(10) {
        c /= 10;
        q += 1;
    }
    (c, q)
}

fn digit_count(c: u128) -> u32 {
    c.checked_ilog10().map_or(1, |l| l + 1)
}

#[cfg(test)]
mod unit {
    use super::*;

    fn dec(negative: bool, coeff: u128, exp: i32) -> Decimal128 {
        let biased = (exp + BIAS) as u128;
        Decimal128::from_bytes(((u128::from(negative) << 127) | (biased << 113) | coeff).to_le_bytes())
    }

    #[test]
    fn equal_values_share_a_key_and_order_holds() {
        let one = sort_key(dec(false, 1, 0));
        let one_00 = sort_key(dec(false, 100, -2));
        assert_eq!(one.as_slice(), one_00.as_slice());
        let ordered = [
            sort_key(Decimal128::from_bytes((0b1_1111u128 << 122).to_le_bytes())),
            sort_key(dec(true, 5, 3)),
            sort_key(dec(true, 2, 0)),
            sort_key(dec(true, 15, -1)),
            sort_key(dec(false, 0, 7)),
            sort_key(dec(false, 15, -1)),
            sort_key(dec(false, 2, 0)),
            sort_key(dec(false, 5, 3)),
            sort_key(Decimal128::from_bytes((0b1_1110u128 << 122).to_le_bytes())),
        ];
        for w in ordered.windows(2) {
            assert!(w[0].as_slice() < w[1].as_slice(), "{w:?}");
        }
    }

    #[test]
    fn key_round_trips() {
        for d in [
            dec(false, 1, 0),
            dec(true, 123_456, -40),
            dec(false, MAX_COEFF, 6111),
        ] {
            let key = sort_key(d);
            let (back, used) = from_key(key.as_slice(), 0).expect("decodes");
            assert_eq!(used, key.len);
            assert_eq!(sort_key(back).as_slice(), key.as_slice());
        }
        // 10^33 at the top exponent normalises to 1E6144 and must be padded back.
        let top = dec(false, 10u128.pow(33), 6111);
        let (back, _) = from_key(sort_key(top).as_slice(), 0).expect("decodes");
        assert_eq!(sort_key(back).as_slice(), sort_key(top).as_slice());
    }
}

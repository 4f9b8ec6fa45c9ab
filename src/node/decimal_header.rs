//! Numbers as header values without an allocation: `x-quotaroute-attempts` and
//! `x-quotaroute-overhead-us` on every answer. Below [`TABLED`] a value is a slice of one table
//! of every such number's digits, built at compile time (only the pages read are ever
//! resident); from there up, `HeaderValue::from` writes it as before.

use bytes::Bytes;
use http::header::HeaderValue;

/// The numbers the table holds: `0..TABLED` (an overhead under 100 ms, any attempt count).
const TABLED: u64 = 100_000;

/// The digits of `0..TABLED`, one number after another: ten of one digit, ninety of two, …
const TABLE_BYTES: usize = 10 + 90 * 2 + 900 * 3 + 9_000 * 4 + 90_000 * 5;

static DECIMALS: [u8; TABLE_BYTES] = decimals();

/// For each width (1 to 5 digits): its first number and where that number begins in the table.
const WIDTH_STARTS: [(u64, usize); 5] = [
    (0, 0),
    (10, 10),
    (100, 10 + 90 * 2),
    (1_000, 10 + 90 * 2 + 900 * 3),
    (10_000, 10 + 90 * 2 + 900 * 3 + 9_000 * 4),
];

/// Writes `0..TABLED` in decimal, one after another.
const fn decimals() -> [u8; TABLE_BYTES] {
    let mut table = [0u8; TABLE_BYTES];
    let mut at = 0;
    let mut number = 0;
    while number < TABLED {
        let width = width(number);
        let mut rest = number;
        let mut digit = width;
        while digit > 0 {
            digit -= 1;
            table[at + digit] = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        at += width;
        number += 1;
    }
    table
}

/// How many decimal digits `number` has.
const fn width(number: u64) -> usize {
    let mut width = 1;
    let mut bound = 10;
    while number >= bound {
        width += 1;
        bound *= 10;
    }
    width
}

/// `number` in decimal, as `HeaderValue::from(number)` writes it.
pub fn decimal(number: u64) -> HeaderValue {
    if number < TABLED {
        let width = width(number);
        // Where the numbers of this width begin, then this one's place among them.
        let (first, first_at) = WIDTH_STARTS[width - 1];
        let start = first_at + (number - first) as usize * width;
        if let Some(digits) = DECIMALS.get(start..start + width) {
            if let Ok(value) = HeaderValue::from_maybe_shared(Bytes::from_static(digits)) {
                return value;
            }
        }
    }
    HeaderValue::from(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tabled_number_is_written_as_from_u64_writes_it() {
        for number in 0..TABLED + 10 {
            assert_eq!(decimal(number), HeaderValue::from(number), "{number}");
        }
    }

    #[test]
    fn numbers_past_the_table_are_written_as_from_u64_writes_them() {
        for number in [TABLED, 123_456, 9_999_999, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(decimal(number), HeaderValue::from(number), "{number}");
        }
    }

    #[test]
    fn the_table_ends_with_the_last_tabled_number() {
        assert_eq!(&DECIMALS[TABLE_BYTES - 5..], b"99999");
        assert_eq!(&DECIMALS[..12], b"012345678910");
    }
}

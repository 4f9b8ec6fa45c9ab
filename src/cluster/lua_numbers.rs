//! Numbers the lease scripts take and keep: every argument is an integer string no greater
//! than [`LUA_INT_MAX`], and the scripts' counters saturate there instead of failing.
//!
//! Why: Redis' Lua holds numbers as doubles and prints them with `%.14g`, so a value from
//! about 1e14 up reaches `INCRBY` as `1e+14` and the command fails ("value is not an integer
//! or out of range") on every round until the node restarts (issue #34: one absurd usage of
//! one client made Redis look down to the whole node). Doubles are exact up to 2^53, so
//! nothing at or below it is rounded; a counter at the cap means "spent beyond any limit".

/// The greatest integer a Lua double holds exactly (2^53 − 1): arguments and counters stop
/// here. In nano-USD that is $9 M, in tokens 9 × 10^15: past any real limit.
pub const LUA_INT_MAX: u64 = (1 << 53) - 1;

/// `value` as the integer string a script reads with `tonumber`, clamped to [`LUA_INT_MAX`].
pub fn arg(value: u64) -> String {
    value.min(LUA_INT_MAX).to_string()
}

/// Lua shared by the lease scripts (prepended to each): `read` turns a stored counter into a
/// number in [0, cap] (missing reads 0; anything that is not a number reads as the cap, so
/// a damaged counter refuses rather than grants), and `add` adds `n` to a counter with its
/// TTL, saturating at the cap, written back with `%d` (never as `1e+14`).
pub const PRELUDE: &str = r"
local CAP = 9007199254740991
local function read(v)
  if not v then return 0 end
  local n = tonumber(v)
  if n == nil or n ~= n then return CAP end
  if n < 0 then return 0 end
  if n > CAP then return CAP end
  return math.floor(n)
end
local function add(key, n, ttl)
  if n <= 0 then return end
  local total = math.min(CAP, read(redis.call('GET', key)) + n)
  redis.call('SET', key, string.format('%d', total), 'EX', string.format('%d', ttl))
end
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_integer_strings_at_most_the_cap() {
        assert_eq!(arg(0), "0");
        assert_eq!(arg(99_999_999_999_999), "99999999999999");
        assert_eq!(arg(LUA_INT_MAX), "9007199254740991");
        assert_eq!(arg(u64::MAX), "9007199254740991");
        assert!(PRELUDE.contains(&LUA_INT_MAX.to_string()));
    }
}

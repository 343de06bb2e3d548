//! Residue classes of partitions, `p % modulus == residue`: a broadcast is the class
//! `(1, 0)`, a grid row or column of a join without keys is `(rows, r)` or `(cols, c)`,
//! and split trees narrow a class to each child's partitions by intersecting it with the
//! child's class (the Chinese remainder theorem).

/// Greatest common divisor.
pub fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The partitions in both residue classes `p % m1 == r1` and `p % m2 == r2`, as one
/// class `(modulus, residue)` with `residue < modulus`, or None when no integer is in
/// both (the Chinese remainder theorem, for any moduli). Broadcasts and grid rows are
/// such classes; split trees narrow them level by level with this.
pub fn intersect(a: (u64, u64), b: (u64, u64)) -> Option<(u64, u64)> {
    let ((m1, r1), (m2, r2)) = (a, b);
    let (m1, m2) = (m1.max(1), m2.max(1));
    let (r1, r2) = (r1 % m1, r2 % m2);
    // One modulus a multiple of the other (a broadcast, or a tree level below a grid
    // class): the finer class, if it lies in the coarser one.
    if m2.is_multiple_of(m1) {
        return (r2 % m1 == r1).then_some((m2, r2));
    }
    if m1.is_multiple_of(m2) {
        return (r1 % m2 == r2).then_some((m1, r1));
    }
    let g = gcd(m1, m2);
    if r1 % g != r2 % g {
        return None;
    }
    let l = m1 / g * m2;
    // x = r1 + m1 * k with m1 * k == r2 - r1 (mod m2): k = ((r2 - r1) / g) * inv(m1 / g) mod (m2 / g).
    let m2g = (m2 / g) as i128;
    let diff = ((r2 as i128 - r1 as i128) / g as i128).rem_euclid(m2g.max(1));
    let k = (diff * inverse((m1 / g) as i128, m2g)).rem_euclid(m2g.max(1));
    let x = (r1 as i128 + m1 as i128 * k).rem_euclid(l as i128);
    Some((l, x as u64))
}

/// `a^-1 mod m` for coprime `a`, `m` (1 when m is 1).
fn inverse(a: i128, m: i128) -> i128 {
    if m <= 1 {
        return 0;
    }
    let (mut old_r, mut r) = (a.rem_euclid(m), m);
    let (mut old_s, mut s) = (1i128, 0i128);
    while r != 0 {
        let q = old_r / r;
        (old_r, r) = (r, old_r - q * r);
        (old_s, s) = (s, old_s - q * s);
    }
    old_s.rem_euclid(m)
}

/// The partitions below `q` in class `(modulus, residue)`, ascending.
pub fn class_members(class: (u64, u64), q: u64) -> impl Iterator<Item = u64> {
    let (m, r) = (class.0.max(1), class.1);
    (r..q).step_by(m.min(usize::MAX as u64) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `intersect` agrees with a search over the integers below the moduli's product.
    #[test]
    fn intersections_equal_a_search() {
        for m1 in 1..9u64 {
            for m2 in 1..9u64 {
                for r1 in 0..m1 {
                    for r2 in 0..m2 {
                        let both: Vec<u64> = (0..m1 * m2 * 2)
                            .filter(|p| p % m1 == r1 && p % m2 == r2)
                            .collect();
                        match intersect((m1, r1), (m2, r2)) {
                            None => assert!(both.is_empty(), "{m1} {r1} {m2} {r2}"),
                            Some((l, x)) => {
                                let want: Vec<u64> =
                                    (0..m1 * m2 * 2).filter(|p| p % l == x).collect();
                                assert_eq!(both, want, "{m1} {r1} {m2} {r2} -> {l} {x}");
                                assert!(x < l);
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(
            class_members((3, 1), 11).collect::<Vec<_>>(),
            vec![1, 4, 7, 10]
        );
    }
}

//! A generator of a day of trip requests in a metropolitan area, deterministic per seed.
//!
//! The city is a 40 x 40 km plane with residential districts, business districts,
//! shopping centers and a downtown, each a Gaussian cluster. The rate follows a daily
//! curve (a quiet night, a morning peak near 8:00, a lunch bump, an evening peak near
//! 17:00), and what people travel for changes with the hour: home to work in the
//! morning, work to home in the evening, to the shops at midday, home at night, and
//! some trips anywhere at any time. Only trips of at least 3 km are requests (Paper
//! III kept those of ST-ACTS' simulated Copenhagen). Every request waits at most
//! `wait` seconds (Paper III: 10 minutes).

use crate::request::Request;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// Requests in the day (Paper III's full load: 251,000).
    pub requests: usize,
    /// The seed: the same seed gives the same requests.
    pub seed: u64,
    /// How long a request waits at most, seconds (deadline = time + wait).
    pub wait: i64,
    /// The length of the day, seconds (the curve is stretched to it).
    pub day: i64,
}

impl Default for GenConfig {
    fn default() -> GenConfig {
        GenConfig {
            requests: 251_000,
            seed: 1,
            wait: 600,
            day: 86_400,
        }
    }
}

/// The side of the city's square, meters.
pub const SIDE: f64 = 40_000.0;
/// The shortest trip that is a request, meters.
pub const MIN_TRIP: f64 = 3_000.0;

#[derive(Clone, Copy)]
struct Cluster {
    x: f64,
    y: f64,
    sd: f64,
}

const fn c(x: f64, y: f64, sd: f64) -> Cluster {
    Cluster { x, y, sd }
}

/// Homes: eight districts around the center.
const HOMES: [Cluster; 8] = [
    c(8_000.0, 9_000.0, 2_500.0),
    c(31_000.0, 7_500.0, 2_800.0),
    c(6_500.0, 30_000.0, 2_200.0),
    c(33_000.0, 31_500.0, 2_600.0),
    c(20_000.0, 4_000.0, 2_000.0),
    c(3_500.0, 19_000.0, 1_800.0),
    c(36_000.0, 20_000.0, 2_000.0),
    c(21_000.0, 36_000.0, 2_400.0),
];
/// Work: downtown and three business districts.
const WORK: [Cluster; 4] = [
    c(20_000.0, 20_000.0, 1_500.0),
    c(26_000.0, 15_000.0, 1_200.0),
    c(13_000.0, 24_000.0, 1_000.0),
    c(24_500.0, 27_000.0, 900.0),
];
/// Shopping centers.
const SHOPS: [Cluster; 3] = [
    c(11_000.0, 14_000.0, 600.0),
    c(29_000.0, 24_000.0, 500.0),
    c(18_000.0, 31_000.0, 700.0),
];

#[derive(Clone, Copy)]
enum Place {
    Home,
    Work,
    Shop,
    Anywhere,
}

/// The relative request rate at minute `m` of a 1,440-minute day.
pub fn rate(m: f64) -> f64 {
    let g = |mu: f64, sd: f64| (-0.5 * ((m - mu) / sd).powi(2)).exp();
    0.15 + 1.0 * g(8.0 * 60.0, 60.0) + 0.8 * g(17.0 * 60.0, 75.0) + 0.35 * g(12.5 * 60.0, 120.0)
}

/// The day's requests, ordered by time (ties by id).
pub fn generate(cfg: &GenConfig) -> Vec<Request> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    // The cumulative rate per minute, to draw times by inverse transform.
    let mut cum = Vec::with_capacity(1440);
    let mut total = 0.0;
    for m in 0..1440 {
        total += rate(m as f64 + 0.5);
        cum.push(total);
    }
    let mut times: Vec<i64> = (0..cfg.requests)
        .map(|_| {
            let u = rng.gen::<f64>() * total;
            let m = cum.partition_point(|&c| c < u).min(1439);
            let s = (m as f64 + rng.gen::<f64>()) / 1440.0;
            ((s * cfg.day as f64) as i64).min(cfg.day - 1)
        })
        .collect();
    times.sort_unstable();
    times
        .into_iter()
        .enumerate()
        .map(|(id, t)| {
            let hour = t as f64 * 24.0 / cfg.day as f64;
            let (from, to) = purpose(hour, &mut rng);
            let (ox, oy, dx, dy) = trip(from, to, &mut rng);
            Request {
                id: id as i64,
                t,
                ox,
                oy,
                dx,
                dy,
                deadline: t + cfg.wait,
            }
        })
        .collect()
}

/// Where trips go from and to at this hour.
fn purpose(hour: f64, rng: &mut ChaCha8Rng) -> (Place, Place) {
    use Place::*;
    let u: f64 = rng.gen();
    match hour {
        h if (6.0..10.0).contains(&h) => match u {
            u if u < 0.65 => (Home, Work),
            u if u < 0.85 => (Home, Shop),
            _ => (Anywhere, Anywhere),
        },
        h if (10.0..15.0).contains(&h) => match u {
            u if u < 0.4 => (Work, Shop),
            u if u < 0.7 => (Home, Shop),
            _ => (Anywhere, Anywhere),
        },
        h if (15.0..20.0).contains(&h) => match u {
            u if u < 0.6 => (Work, Home),
            u if u < 0.8 => (Shop, Home),
            _ => (Anywhere, Anywhere),
        },
        _ => match u {
            u if u < 0.5 => (Shop, Home),
            _ => (Anywhere, Anywhere),
        },
    }
}

/// A trip of at least [`MIN_TRIP`] from a `from` place to a `to` place.
fn trip(from: Place, to: Place, rng: &mut ChaCha8Rng) -> (i64, i64, i64, i64) {
    loop {
        let (ox, oy) = place(from, rng);
        let (dx, dy) = place(to, rng);
        let (x, y) = ((dx - ox) as f64, (dy - oy) as f64);
        if (x * x + y * y).sqrt() >= MIN_TRIP {
            return (ox, oy, dx, dy);
        }
    }
}

/// A point of a place of this kind: one of its clusters, a normal draw around it.
fn place(kind: Place, rng: &mut ChaCha8Rng) -> (i64, i64) {
    let list: &[Cluster] = match kind {
        Place::Home => &HOMES,
        Place::Work => &WORK,
        Place::Shop => &SHOPS,
        Place::Anywhere => {
            // A fifth of such places are anywhere in the city, the rest in a cluster
            // of any kind.
            if rng.gen::<f64>() < 0.2 {
                return (
                    (rng.gen::<f64>() * SIDE) as i64,
                    (rng.gen::<f64>() * SIDE) as i64,
                );
            }
            let all = HOMES.len() + WORK.len() + SHOPS.len();
            let i = rng.gen_range(0..all);
            let cl = HOMES
                .iter()
                .chain(WORK.iter())
                .chain(SHOPS.iter())
                .nth(i)
                .copied()
                .expect("in range");
            return normal_point(cl, rng);
        }
    };
    let cl = list[rng.gen_range(0..list.len())];
    normal_point(cl, rng)
}

fn normal_point(cl: Cluster, rng: &mut ChaCha8Rng) -> (i64, i64) {
    // Box-Muller: two independent standard normals.
    let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.gen();
    let r = (-2.0 * u1.ln()).sqrt();
    let (s, c) = (2.0 * std::f64::consts::PI * u2).sin_cos();
    let x = (cl.x + cl.sd * r * c).clamp(0.0, SIDE - 1.0);
    let y = (cl.y + cl.sd * r * s).clamp(0.0, SIDE - 1.0);
    (x as i64, y as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_day_and_another_does_not() {
        let cfg = GenConfig {
            requests: 5_000,
            ..GenConfig::default()
        };
        let a = generate(&cfg);
        assert_eq!(a, generate(&cfg));
        let b = generate(&GenConfig { seed: 2, ..cfg });
        assert_ne!(a, b);
    }

    #[test]
    fn requests_are_ordered_long_enough_and_peak_in_the_morning() {
        let day = generate(&GenConfig {
            requests: 50_000,
            ..GenConfig::default()
        });
        assert_eq!(day.len(), 50_000);
        assert!(day
            .windows(2)
            .all(|w| w[0].t <= w[1].t && w[0].id < w[1].id));
        assert!(day.iter().all(|r| r.length() >= MIN_TRIP));
        assert!(day.iter().all(|r| r.deadline == r.t + 600));
        let hour = |h: i64| day.iter().filter(|r| r.t / 3600 == h).count();
        // The 8:00 hour is busier than 3:00 by several times, 17:00 too.
        assert!(hour(8) > 4 * hour(3), "{} vs {}", hour(8), hour(3));
        assert!(hour(17) > 4 * hour(3));
        // Mornings head downtown: more destinations near the center than origins.
        let near = |x: i64, y: i64| dist_c(x, y) < 5_000.0;
        let morning: Vec<_> = day.iter().filter(|r| r.t / 3600 == 8).collect();
        let to = morning.iter().filter(|r| near(r.dx, r.dy)).count();
        let from = morning.iter().filter(|r| near(r.ox, r.oy)).count();
        assert!(to > 2 * from, "{to} vs {from}");
    }

    fn dist_c(x: i64, y: i64) -> f64 {
        crate::request::dist(x, y, 20_000, 20_000)
    }
}

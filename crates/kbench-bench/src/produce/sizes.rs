//! Record sizes drawn from weighted buckets: `--record-size 100:0.7,1000:0.25,10000:0.05` and
//! OMB's `messageSizeDistribution`. The weights are normalised when the distribution is made; the
//! record loop draws one number per record from the run's seeded RNG and finds its bucket in the
//! precomputed cumulative weights ([`SizeDistribution::cumulative`], [`pick`]).

use crate::spec::Span;

/// One size and its share of the records (the shares of a distribution add up to 1).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SizeBucket {
    pub size: usize,
    pub weight: f64,
}

/// Record sizes with their weights, in the order given; every size at least 1 byte, appearing
/// once, with a share above zero.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SizeDistribution {
    buckets: Vec<SizeBucket>,
}

impl SizeDistribution {
    /// The distribution of `(size, weight)` pairs: weights need not add up to 1 (they are
    /// normalised); a size of 0, a size given twice, or a weight that is not a finite number above
    /// zero is an error naming it.
    pub fn new(pairs: &[(usize, f64)]) -> Result<SizeDistribution, String> {
        if pairs.is_empty() {
            return Err("no sizes given".into());
        }
        for (i, (size, weight)) in pairs.iter().enumerate() {
            if *size == 0 {
                return Err("size 0: a record size is at least 1 byte".into());
            }
            if !(weight.is_finite() && *weight > 0.0) {
                return Err(format!("size {size}: weight {weight} is not above zero"));
            }
            if pairs[..i].iter().any(|(s, _)| s == size) {
                return Err(format!("size {size} is given twice"));
            }
        }
        let total: f64 = pairs.iter().map(|(_, w)| w).sum();
        if !total.is_finite() {
            return Err("the weights add up past what a number holds".into());
        }
        Ok(SizeDistribution {
            buckets: pairs
                .iter()
                .map(|&(size, weight)| SizeBucket {
                    size,
                    weight: weight / total,
                })
                .collect(),
        })
    }

    /// `SIZE:WEIGHT,SIZE:WEIGHT,…` (`100:0.7,1000:0.25,10000:0.05`); errors name the bad part.
    pub fn parse(s: &str) -> Result<SizeDistribution, String> {
        let mut pairs = Vec::new();
        for (i, part) in s.split(',').enumerate() {
            let part = part.trim();
            let bad = |why: &str| format!("part {} {part:?}: {why}", i + 1);
            let (size, weight) = part
                .split_once(':')
                .ok_or_else(|| bad("expected SIZE:WEIGHT"))?;
            let size: usize = size
                .trim()
                .parse()
                .map_err(|_| bad("the size is not a whole number of bytes"))?;
            let weight: f64 = weight
                .trim()
                .parse()
                .map_err(|_| bad("the weight is not a number"))?;
            if size == 0 {
                return Err(bad("a record size is at least 1 byte"));
            }
            if !(weight.is_finite() && weight > 0.0) {
                return Err(bad("the weight must be a number above zero"));
            }
            pairs.push((size, weight));
        }
        SizeDistribution::new(&pairs)
    }

    pub fn buckets(&self) -> &[SizeBucket] {
        &self.buckets
    }

    pub fn largest(&self) -> usize {
        self.buckets.iter().map(|b| b.size).max().unwrap_or(0)
    }

    /// The mean record size the weights give, in bytes.
    pub fn mean(&self) -> f64 {
        self.buckets.iter().map(|b| b.size as f64 * b.weight).sum()
    }

    /// The cumulative shares, one per bucket, the last exactly 1: bucket `i` takes the draws in
    /// `[cumulative[i-1], cumulative[i])`.
    pub fn cumulative(&self) -> Box<[f64]> {
        let mut sum = 0.0;
        let mut c: Vec<f64> = self
            .buckets
            .iter()
            .map(|b| {
                sum += b.weight;
                sum
            })
            .collect();
        if let Some(last) = c.last_mut() {
            *last = 1.0;
        }
        c.into_boxed_slice()
    }

    /// `100 B × 0.7, 1000 B × 0.25, …`
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .buckets
            .iter()
            .map(|b| format!("{} B × {}", b.size, round(b.weight)))
            .collect();
        parts.join(", ")
    }
}

/// A share printed to 6 significant places (normalising 1/3 leaves 0.333…3).
fn round(w: f64) -> f64 {
    (w * 1e6).round() / 1e6
}

/// The bucket a draw `x` in `[0, 1)` falls in, given [`SizeDistribution::cumulative`].
#[inline]
pub fn pick(cumulative: &[f64], x: f64) -> usize {
    cumulative
        .partition_point(|c| *c <= x)
        .min(cumulative.len() - 1)
}

/// What `--record-size` says: a size, a range `MIN..MAX`, or weighted sizes.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordSize {
    Span(Span<usize>),
    Weighted(SizeDistribution),
}

impl RecordSize {
    /// `100`, `100..1000`, or `100:0.7,1000:0.25,10000:0.05`.
    pub fn parse(s: &str) -> Result<RecordSize, String> {
        if s.contains(':') || s.contains(',') {
            SizeDistribution::parse(s).map(RecordSize::Weighted)
        } else {
            crate::spec::parse_positive_span(s).map(RecordSize::Span)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn weighted_sizes_parse_and_normalise() {
        let d = SizeDistribution::parse("100:0.7,1000:0.25,10000:0.05").unwrap();
        let sizes: Vec<usize> = d.buckets().iter().map(|b| b.size).collect();
        assert_eq!(sizes, [100, 1000, 10000]);
        assert!((d.buckets()[0].weight - 0.7).abs() < 1e-12);
        assert_eq!(d.largest(), 10000);
        assert!((d.mean() - (70.0 + 250.0 + 500.0)).abs() < 1e-9);
        // Weights that do not add up to 1 are shares of their sum.
        let d = SizeDistribution::parse("10:1, 20:3").unwrap();
        assert_eq!(d.buckets()[1].weight, 0.75);
        assert_eq!(*d.cumulative(), [0.25, 1.0]);
        assert_eq!(d.describe(), "10 B × 0.25, 20 B × 0.75");
    }

    #[test]
    fn bad_weighted_sizes_name_the_part() {
        for (bad, says) in [
            (
                "100:0.5,200:0",
                "part 2 \"200:0\": the weight must be a number above zero",
            ),
            ("100:-1", "part 1 \"100:-1\": the weight"),
            ("0:1", "part 1 \"0:1\": a record size is at least 1 byte"),
            ("100:0.5,x:1", "part 2 \"x:1\": the size is not"),
            ("100:0.5,200", "part 2 \"200\": expected SIZE:WEIGHT"),
            ("100:0.5,", "part 2 \"\": expected SIZE:WEIGHT"),
            ("100:abc", "part 1 \"100:abc\": the weight is not a number"),
            ("100:NaN", "the weight must be a number above zero"),
            ("100:1,100:2", "size 100 is given twice"),
        ] {
            let e = RecordSize::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(SizeDistribution::new(&[]).is_err());
        assert!(SizeDistribution::new(&[(5, f64::MAX), (6, f64::MAX)]).is_err());
    }

    #[test]
    fn a_plain_size_or_range_stays_a_span() {
        assert_eq!(
            RecordSize::parse("100").unwrap(),
            RecordSize::Span(Span { min: 100, max: 100 })
        );
        assert_eq!(
            RecordSize::parse("100..1000").unwrap(),
            RecordSize::Span(Span {
                min: 100,
                max: 1000
            })
        );
        assert!(RecordSize::parse("0").is_err());
    }

    /// 30 000 draws: every bucket's share within 4 binomial sigmas of its weight, and the same
    /// draws from the same seed.
    #[test]
    fn draws_follow_the_weights() {
        let d = SizeDistribution::parse("100:0.7,1000:0.25,10000:0.05").unwrap();
        let c = d.cumulative();
        let draw = |seed| {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut counts = [0u64; 3];
            for _ in 0..30_000 {
                counts[pick(&c, rng.random())] += 1;
            }
            counts
        };
        let counts = draw(7);
        assert_eq!(counts, draw(7));
        for (b, n) in d.buckets().iter().zip(counts) {
            let sigma = (30_000.0 * b.weight * (1.0 - b.weight)).sqrt();
            assert!(
                (n as f64 - 30_000.0 * b.weight).abs() < 4.0 * sigma,
                "{} B: {n}",
                b.size
            );
        }
        assert_eq!(pick(&c, 0.0), 0);
        assert_eq!(pick(&c, 0.7), 1);
        assert_eq!(pick(&c, 0.999_999_9), 2);
    }
}

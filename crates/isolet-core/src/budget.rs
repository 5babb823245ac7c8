//! Per-run accounting of host calls in flight: how many, and how many bytes of their
//! arguments and replies the host holds for them, and how many values its arguments
//! hold (what they cost the host once deserialized, see `value_count`). A call is
//! counted from the moment the sandbox makes it until its reply has been handed back.
use std::collections::HashMap;

use thiserror::Error;

/// A host call the budget refused. The message names the limit.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BudgetError {
    #[error("{in_flight} host calls are already in flight, the limit per execution (maxPendingHostCalls) is {max}; await some before calling again")]
    TooManyCalls { in_flight: usize, max: u32 },
    #[error("host calls in flight already hold {in_flight} bytes; {wanted} more would pass the limit of {max} bytes per execution (maxPendingHostCallBytes)")]
    TooManyBytes { in_flight: usize, wanted: usize, max: usize },
    #[error("host calls in flight already hold {in_flight} values; {wanted} more would pass the limit of {max} values per execution (maxPendingHostCallValues)")]
    TooManyValues { in_flight: u64, wanted: u64, max: u64 },
    #[error("host-call arguments in flight would take about {in_flight} bytes in the host once built; {wanted} more would pass {max} bytes, 6 x the limit per execution (maxPendingHostCallBytes)")]
    TooCostly { in_flight: u64, wanted: u64, max: u64 },
}

/// Host calls in flight for one run.
#[derive(Debug)]
pub struct PendingCalls {
    max_bytes: usize,
    max_calls: u32,
    max_values: u64,
    /// What the arguments in flight may cost the host once built (`limits::built_value_budget`).
    max_cost: u64,
    bytes: usize,
    values: u64,
    cost: u64,
    /// Per call: its bytes (arguments, then also the reply), its arguments' values and cost.
    calls: HashMap<u32, (usize, u64, u64)>,
}

impl PendingCalls {
    pub fn new(max_bytes: usize, max_calls: u32, max_values: u64, max_cost: u64) -> Self {
        PendingCalls { max_bytes, max_calls, max_values, max_cost, bytes: 0, values: 0, cost: 0, calls: HashMap::new() }
    }

    /// Admits call `id` whose arguments take `bytes`, hold `values` and would cost the
    /// host `cost` bytes once built (`value_count::tally`), or refuses it (nothing recorded).
    pub fn begin(&mut self, id: u32, bytes: usize, values: u64, cost: u64) -> Result<(), BudgetError> {
        if self.calls.len() >= self.max_calls as usize {
            return Err(BudgetError::TooManyCalls { in_flight: self.calls.len(), max: self.max_calls });
        }
        if bytes > self.max_bytes - self.bytes {
            return Err(BudgetError::TooManyBytes { in_flight: self.bytes, wanted: bytes, max: self.max_bytes });
        }
        if values > self.max_values - self.values {
            return Err(BudgetError::TooManyValues { in_flight: self.values, wanted: values, max: self.max_values });
        }
        if cost > self.max_cost.saturating_sub(self.cost) {
            return Err(BudgetError::TooCostly { in_flight: self.cost, wanted: cost, max: self.max_cost });
        }
        self.reserve(bytes)?;
        self.values += values;
        self.cost += cost;
        self.calls.insert(id, (bytes, values, cost));
        Ok(())
    }

    /// Charges the reply of call `id`. `Ok(false)`: no such call is in flight (a late
    /// or unknown reply, which the caller drops). On `Err` the call stays in flight,
    /// charged only for its arguments.
    pub fn charge_reply(&mut self, id: u32, bytes: usize) -> Result<bool, BudgetError> {
        if !self.calls.contains_key(&id) {
            return Ok(false);
        }
        self.reserve(bytes)?;
        self.calls.get_mut(&id).expect("checked above").0 += bytes;
        Ok(true)
    }

    /// The reply of call `id` reached the sandbox: forget the call and its bytes.
    pub fn settle(&mut self, id: u32) {
        if let Some((bytes, values, cost)) = self.calls.remove(&id) {
            self.bytes -= bytes;
            self.values -= values;
            self.cost -= cost;
        }
    }

    /// The run ended: nothing is in flight any more.
    pub fn clear(&mut self) {
        self.calls.clear();
        self.bytes = 0;
        self.values = 0;
        self.cost = 0;
    }

    pub fn in_flight(&self) -> usize {
        self.calls.len()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn values(&self) -> u64 {
        self.values
    }

    pub fn cost(&self) -> u64 {
        self.cost
    }

    fn reserve(&mut self, bytes: usize) -> Result<(), BudgetError> {
        if bytes > self.max_bytes - self.bytes {
            return Err(BudgetError::TooManyBytes { in_flight: self.bytes, wanted: bytes, max: self.max_bytes });
        }
        self.bytes += bytes;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_arguments_and_replies_until_settled() {
        let mut p = PendingCalls::new(100, 10, 1000, u64::MAX);
        p.begin(1, 40, 1, 0).unwrap();
        p.begin(2, 40, 1, 0).unwrap();
        // 81 > 100 - 80: refused, nothing recorded.
        assert_eq!(p.begin(3, 21, 1, 0), Err(BudgetError::TooManyBytes { in_flight: 80, wanted: 21, max: 100 }));
        assert_eq!(p.in_flight(), 2);
        assert_eq!(p.charge_reply(1, 20), Ok(true));
        assert_eq!(p.bytes(), 100);
        assert!(p.charge_reply(2, 1).is_err());
        p.settle(1);
        assert_eq!((p.in_flight(), p.bytes()), (1, 40));
        p.begin(3, 60, 1, 0).unwrap();
        assert_eq!(p.bytes(), 100);
    }

    #[test]
    fn caps_the_values_of_arguments_in_flight() {
        let mut p = PendingCalls::new(1000, 10, 100, u64::MAX);
        p.begin(1, 10, 60, 0).unwrap();
        assert_eq!(p.begin(2, 10, 41, 0), Err(BudgetError::TooManyValues { in_flight: 60, wanted: 41, max: 100 }));
        assert_eq!((p.in_flight(), p.bytes(), p.values()), (1, 10, 60));
        p.begin(2, 10, 40, 0).unwrap();
        // A reply costs bytes, not argument values.
        assert_eq!(p.charge_reply(2, 5), Ok(true));
        p.settle(1);
        assert_eq!((p.bytes(), p.values()), (15, 40));
        p.begin(3, 0, 60, 0).unwrap();
        assert!(p.begin(4, 0, 1, 0).unwrap_err().to_string().contains("maxPendingHostCallValues"));
        p.clear();
        assert_eq!(p.values(), 0);
    }

    #[test]
    fn caps_what_the_arguments_in_flight_cost_once_built() {
        let mut p = PendingCalls::new(1000, 10, 1000, 100);
        p.begin(1, 10, 1, 70).unwrap();
        assert_eq!(p.begin(2, 10, 1, 31), Err(BudgetError::TooCostly { in_flight: 70, wanted: 31, max: 100 }));
        assert!(p.begin(2, 10, 1, 31).unwrap_err().to_string().contains("(maxPendingHostCallBytes)"));
        p.begin(2, 10, 1, 30).unwrap();
        p.settle(1);
        assert_eq!(p.cost(), 30);
        p.begin(3, 10, 1, 70).unwrap();
        p.clear();
        assert_eq!(p.cost(), 0);
    }

    #[test]
    fn caps_the_number_of_calls() {
        let mut p = PendingCalls::new(1000, 2, 1000, u64::MAX);
        p.begin(1, 0, 1, 0).unwrap();
        p.begin(2, 0, 1, 0).unwrap();
        let err = p.begin(3, 0, 1, 0).unwrap_err();
        assert!(err.to_string().contains("maxPendingHostCalls"));
        p.settle(2);
        p.begin(3, 0, 1, 0).unwrap();
    }

    #[test]
    fn late_or_unknown_replies_are_not_charged_and_clear_frees_everything() {
        let mut p = PendingCalls::new(10, 2, 1000, u64::MAX);
        assert_eq!(p.charge_reply(7, 5), Ok(false));
        p.begin(1, 10, 1, 0).unwrap();
        p.settle(1);
        p.settle(1);
        assert_eq!(p.charge_reply(1, 5), Ok(false));
        p.begin(2, 3, 1, 0).unwrap();
        p.clear();
        assert_eq!((p.in_flight(), p.bytes()), (0, 0));
        assert!(BudgetError::TooManyBytes { in_flight: 1, wanted: 2, max: 3 }.to_string().contains("maxPendingHostCallBytes"));
    }
}

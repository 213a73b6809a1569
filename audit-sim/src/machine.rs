//! The machine the operator tools run on: its CPU model (named in every
//! timing measured here) and the memory available to a measurement.

pub use pir_core::bench::mem_available;

/// This machine's CPU model: the first `model name` (or `Hardware`,
/// `Processor`) of `/proc/cpuinfo`, with its `cpu family` and `model`
/// numbers where given (virtual machines often name only the brand, "AMD
/// EPYC": family 25 model 1 is a Zen 3), else "an unidentified `<arch>`
/// CPU".
pub fn cpu_model() -> String {
    use std::io::Read as _;
    let mut text = String::new();
    let found = std::fs::File::open("/proc/cpuinfo")
        .and_then(|f| f.take(1 << 20).read_to_string(&mut text))
        .ok()
        .and_then(|_| cpu_model_from(&text));
    found.unwrap_or_else(|| format!("an unidentified {} CPU", std::env::consts::ARCH))
}

fn cpu_model_from(cpuinfo: &str) -> Option<String> {
    let field = |key: &str| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            let v: String = v
                .trim()
                .chars()
                .filter(|c| !c.is_control())
                .take(120)
                .collect();
            (k.trim() == key && !v.is_empty()).then_some(v)
        })
    };
    let name = ["model name", "Hardware", "Processor"]
        .iter()
        .find_map(|key| field(key))?;
    let number = |key: &str| field(key).and_then(|v| v.parse::<u32>().ok());
    Some(match (number("cpu family"), number("model")) {
        (Some(family), Some(model)) => format!("{name}, family {family} model {model}"),
        _ => name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_is_read_from_cpuinfo() {
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n";
        assert_eq!(
            cpu_model_from(x86).as_deref(),
            Some("AMD EPYC 9R14 96-Core Processor")
        );
        // a brand-only name in a virtual machine, identified by its numbers
        let vm = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nstepping\t: 1\n\nprocessor\t: 1\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n";
        assert_eq!(
            cpu_model_from(vm).as_deref(),
            Some("AMD EPYC, family 25 model 1")
        );
        // numbers that are not numbers are left out, not guessed
        let odd = "cpu family\t: 6x\nmodel\t: 143\nmodel name\t: Intel(R) Xeon(R) Processor\n";
        assert_eq!(
            cpu_model_from(odd).as_deref(),
            Some("Intel(R) Xeon(R) Processor")
        );
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\n\nHardware\t: BCM2835\n";
        assert_eq!(cpu_model_from(arm).as_deref(), Some("BCM2835"));
        assert_eq!(cpu_model_from("model name\t:   \nflags: x"), None);
        assert_eq!(cpu_model_from(""), None);
        let long = format!("model name: {}\u{7}", "x".repeat(500));
        assert_eq!(cpu_model_from(&long).unwrap().len(), 120);
        assert!(!cpu_model().is_empty());
    }
}

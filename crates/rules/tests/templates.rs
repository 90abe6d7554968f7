//! Alert templates expanded as Prometheus 2.42 expands them. The rule in
//! `tests/data/templates/rules.yml` carries one annotation per case; the
//! expected texts are what `promtool test rules test.yml` (in that folder)
//! reported Prometheus expanded for the alert, with `$value` 1234567.891,
//! labels `{__name__="up", instance="node1.example.com:9100", job="node"}`,
//! external label `cluster="eu1"` and external URL
//! `http://prom.example.com:9090/prefix`. Errors are Prometheus's too,
//! column and all. The one case that differs on purpose: `query` printed
//! whole, which Go prints as a pointer; and here no rules are evaluated,
//! so it answers that (`tests/promtool_unit.rs` runs `query` in rules).

use std::collections::BTreeMap;

use chingest_rules::template::{expand_alert_template, expansion_failure, AlertData, Limits};
use chingest_rules::{RuleFile, RuleKind};

/// Prometheus's expansions, by annotation.
const EXPECTED: &[(&str, &str)] = &[
    ("t01", "1.234567891e+06"),
    ("t02", "1.234567891e+06"),
    ("t03", "node1.example.com:9100 node []"),
    ("t04", "1.235M"),
    ("t05", "1.177Mi"),
    ("t06", "14d 6h 56m 7s"),
    ("t07", "12.34%"),
    ("t08", "1970-01-15 06:56:07.891 +0000 UTC"),
    ("t09", "1234567.89|42|1234567.9|ab  |"),
    ("t10", "ABC abc Hello World"),
    ("t11", "node1.example.com"),
    ("t12", "yes"),
    ("t13", "__name__=up;instance=node1.example.com:9100;job=node;"),
    ("t14", "job=nodenone"),
    ("t15", "bigfallback"),
    ("t16", "map[__name__:up instance:node1.example.com:9100 job:node]"),
    ("t17", "3 node"),
    ("t18", "node1.example.com node1:9100"),
    ("t19", "<error expanding template: error executing template __alert_T: template: __alert_T:1:115: executing \"__alert_T\" at <gt $value 1>: error calling gt: incompatible types for comparison>"),
    ("t20", "eu1|http://prom.example.com:9090/prefix"),
    ("t21", "1.234k 120u 500ms 1d 1h 1m 1s"),
    ("t22", "1 2a3|x 1\n|1.5|1000|16|97"),
    ("t23", "<error expanding template: error executing template __alert_T: template: __alert_T:1:115: executing \"__alert_T\" at <humanize \"abc\">: error calling humanize: strconv.ParseFloat: parsing \"abc\": invalid syntax>"),
    ("t24", "<error expanding template: error executing template __alert_T: template: __alert_T:1:115: executing \"__alert_T\" at <.Foo>: can't evaluate field Foo in type struct { Labels map[string]string; ExternalLabels map[string]string; ExternalURL string; Value float64 }>"),
    ("t25", "<error expanding template: error executing template __alert_T: template: __alert_T:1:121: executing \"__alert_T\" at <$value.x>: can't evaluate field x in type float64>"),
    ("t26", "2016-04-26 10:20:00.5 +0000 UTC 5400"),
    ("t27", "1.234567891e+06 node \"node\""),
    ("t28", " a | bc"),
    ("t29", "[node]"),
    ("t30", "map[arg0:1 arg1:a] a"),
    ("t31", "/graph?g0.expr=rate%28x%5B5m%5D%29&g0.tab=0 /graph?g0.expr=up&g0.tab=1"),
    ("t32", "&lt;a href=&#39;x&#39;&gt; a\\'b a+b%26c"),
    ("t33", "true true true true false"),
    ("t34", "1.235e+08% 1 -500m"),
    ("t35", "__name__ instance "),
    ("t36", "2"),
    ("t37", "1.235e+03|1e-06|ff|10|101|true|A"),
    ("t38", "%!s(int=1)|1 %!d(MISSING)|1%!(EXTRA int=2)"),
    ("t39", "[0xc00043b510]"),
    ("t40", "1234567.9"),
];

fn rule_file() -> RuleFile {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/templates/rules.yml"
    );
    chingest_rules::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn data() -> AlertData {
    let labels: BTreeMap<String, String> = [
        ("__name__", "up"),
        ("instance", "node1.example.com:9100"),
        ("job", "node"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    AlertData {
        labels,
        external_labels: [("cluster".to_owned(), "eu1".to_owned())].into(),
        external_url: "http://prom.example.com:9090/prefix".into(),
        value: 1234567.891,
    }
}

#[test]
fn annotations_expand_as_prometheus_expands_them() {
    let file = rule_file();
    let rule = &file.groups[0].rules[0];
    let RuleKind::Alerting(alerting) = &rule.kind else {
        panic!("an alerting rule")
    };
    let mut differences = Vec::new();
    for (name, want) in EXPECTED {
        let text = &alerting
            .annotations
            .iter()
            .find(|(k, _)| k == name)
            .unwrap()
            .1;
        let got = expand_alert_template(&rule.name, text, &data(), None, Limits::default())
            .unwrap_or_else(|err| expansion_failure(&err));
        if *name == "t39" {
            assert!(got.contains("query is not available here"), "{got}");
            continue;
        }
        if got != *want {
            differences.push(format!(
                "{name}: {text}\n  ours:       {got:?}\n  Prometheus: {want:?}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[test]
fn expansion_is_bounded() {
    let limits = Limits {
        max_steps: 1000,
        max_output: 100,
    };
    let long = expand_alert_template(
        "A",
        "{{ range $k, $v := $labels }}{{ $k }}{{ $v }}{{ $v }}{{ $v }}{{ $v }}{{ $v }}{{ end }}",
        &data(),
        None,
        limits,
    );
    assert!(long.unwrap_err().contains("longer than 100 bytes"));
    let mut nested = String::new();
    for _ in 0..6 {
        nested.push_str("{{ range $labels }}");
    }
    nested.push('x');
    for _ in 0..6 {
        nested.push_str("{{ end }}");
    }
    let steps = expand_alert_template(
        "A",
        &nested,
        &data(),
        None,
        Limits {
            max_steps: 1000,
            max_output: 1 << 20,
        },
    );
    assert!(steps.unwrap_err().contains("more than 1000 steps"));
    let recursive = expand_alert_template(
        "A",
        "{{ define \"r\" }}{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}",
        &data(),
        None,
        Limits::default(),
    );
    assert!(recursive.unwrap_err().contains("maximum template depth"));
}

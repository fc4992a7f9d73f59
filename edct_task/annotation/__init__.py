"""Human validation (paper §4.4): interventions, labels, the annotation app and agreement (Table 4)."""

"""What an SNN run writes beside the core's report: summary section, explanations, pictures."""

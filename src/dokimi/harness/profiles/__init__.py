"""Built-in harness profiles (harness_profile.v1 YAML files); see dokimi.harness.profile."""

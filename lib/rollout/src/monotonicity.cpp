namespace cf::rollout {}

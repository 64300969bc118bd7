"""Alerts: what a transition means to people (policy), the outbox that keeps every alert until delivered,
delivery with retries, and one notifier per chat or paging service (`notifiers/`)."""

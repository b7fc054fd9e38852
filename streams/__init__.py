"""The wire: MQTT link, topics, message schemas, validation, recorded-stream readers and replay."""

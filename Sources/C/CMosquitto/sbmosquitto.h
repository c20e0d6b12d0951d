/* SPDX-License-Identifier: Apache-2.0 */
/* libmosquitto, with MQTT 5's response topic and correlation data read and written in one call
 * each (the property lists are linked lists Swift would otherwise walk by hand). */
#ifndef SBMOSQUITTO_H
#define SBMOSQUITTO_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* Publishes `payload` on `topic`; `response_topic` and `correlation` (either may be NULL) go
 * with it as MQTT 5 properties. Returns a MOSQ_ERR_ code. */
static inline int sbmosq_publish(struct mosquitto *m, const char *topic, const void *payload, int len, int qos, bool retain,
				 const char *response_topic, const void *correlation, int correlation_len)
{
	mosquitto_property *props = NULL;
	int rc = MOSQ_ERR_SUCCESS;
	if (response_topic)
		rc = mosquitto_property_add_string(&props, MQTT_PROP_RESPONSE_TOPIC, response_topic);
	if (rc == MOSQ_ERR_SUCCESS && correlation && correlation_len > 0 && correlation_len <= UINT16_MAX)
		rc = mosquitto_property_add_binary(&props, MQTT_PROP_CORRELATION_DATA, correlation, (uint16_t)correlation_len);
	if (rc == MOSQ_ERR_SUCCESS)
		rc = mosquitto_publish_v5(m, NULL, topic, len, payload, qos, retain, props);
	mosquitto_property_free_all(&props);
	return rc;
}

/* Sets the last will (MQTT 5, no properties). */
static inline int sbmosq_will(struct mosquitto *m, const char *topic, const void *payload, int len, int qos, bool retain)
{
	return mosquitto_will_set_v5(m, topic, len, payload, qos, retain, NULL);
}

/* A message's response topic, or NULL; the caller frees it. */
static inline char *sbmosq_response_topic(const mosquitto_property *props)
{
	char *value = NULL;
	if (!props || !mosquitto_property_read_string(props, MQTT_PROP_RESPONSE_TOPIC, &value, false))
		return NULL;
	return value;
}

/* A message's correlation data and its length, or NULL; the caller frees it. */
static inline void *sbmosq_correlation(const mosquitto_property *props, uint16_t *len)
{
	void *value = NULL;
	*len = 0;
	if (!props || !mosquitto_property_read_binary(props, MQTT_PROP_CORRELATION_DATA, &value, len, false))
		return NULL;
	return value;
}

/*
 * Subscribes keeping each message's retain flag as published (MQTT 5 "retain as published"):
 * without it the broker clears the flag on a retained message forwarded to a subscriber that
 * was already online, which then cannot tell a command left retained from a live one.
 */
static inline int sbmosq_subscribe(struct mosquitto *m, const char *topic, int qos)
{
	return mosquitto_subscribe_v5(m, NULL, topic, qos, MQTT_SUB_OPT_RETAIN_AS_PUBLISHED, NULL);
}

static inline int sbmosq_use_v5(struct mosquitto *m)
{
	return mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
}
#endif

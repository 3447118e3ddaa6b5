include $(sort $(wildcard $(BR2_EXTERNAL_TOBE_BODY_PATH)/package/*/*.mk))

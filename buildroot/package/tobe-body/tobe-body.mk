################################################################################
#
# tobe-body
#
################################################################################

# Built from the checkout this external tree is part of.
TOBE_BODY_VERSION = $(shell git -C $(BR2_EXTERNAL_TOBE_BODY_PATH) describe --tags --always --dirty 2>/dev/null || echo local)
TOBE_BODY_SITE = $(BR2_EXTERNAL_TOBE_BODY_PATH)/..
TOBE_BODY_SITE_METHOD = local
TOBE_BODY_LICENSE = Apache-2.0
TOBE_BODY_LICENSE_FILES = LICENSE
# What the build does not need: the checkout's own builds and caches.
TOBE_BODY_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = \
	--exclude /bin --exclude /dist --exclude /var --exclude node_modules
TOBE_BODY_GOMOD = github.com/tobe-body/tobe-body
TOBE_BODY_BUILD_TARGETS = cmd/tobe-body
TOBE_BODY_TAGS = portaudio
TOBE_BODY_LDFLAGS = \
	-X main.version=$(TOBE_BODY_VERSION) \
	-X main.commit=$(TOBE_BODY_VERSION) \
	-X main.buildBoard=$(call qstrip,$(BR2_PACKAGE_TOBE_BODY_BOARD)) \
	-X main.buildTags=portaudio
TOBE_BODY_DEPENDENCIES = portaudio alsa-lib
# The daemon's user, in the devices' groups; the user the agent logs in
# as over ssh (its key's forced command is tobe-body stdio), in the group
# that may reach the agent socket.
define TOBE_BODY_USERS
	tobe-body -1 tobe-body -1 * - - gpio,video,audio,input tobe-body, the body runtime
	tobe -1 tobe -1 * /home/tobe /bin/sh tobe-agent the agent's login (forced command)
endef

# Buildroot vendors a Go package when it downloads it; a local site is
# copied instead, so the modules are vendored here, once, through
# BR2_PACKAGE_TOBE_BODY_GOPROXY into the host's module cache (GOPROXY
# off: the checkout brings vendor/ itself). Before configure: host-go
# is built by then.
define TOBE_BODY_VENDOR
	if [ ! -f $(@D)/vendor/modules.txt ]; then \
		cd $(@D) && $(HOST_GO_COMMON_ENV) GOFLAGS=-mod=mod \
			GOPROXY=$(call qstrip,$(BR2_PACKAGE_TOBE_BODY_GOPROXY)) \
			$(GO_BIN) mod vendor -modcacherw; \
	fi
endef
TOBE_BODY_PRE_CONFIGURE_HOOKS += TOBE_BODY_VENDOR

# The binary, the unit, the udev rules, the config and the schemas, as
# everywhere else the body is installed (scripts/stage.sh).
define TOBE_BODY_INSTALL_TARGET_CMDS
	$(@D)/scripts/stage.sh $(TARGET_DIR) $(@D)/bin/tobe-body
endef

# stage.sh installed the unit; enable it.
define TOBE_BODY_INSTALL_INIT_SYSTEMD
	mkdir -p $(TARGET_DIR)/usr/lib/systemd/system/multi-user.target.wants
	ln -sf ../tobe-body.service \
		$(TARGET_DIR)/usr/lib/systemd/system/multi-user.target.wants/tobe-body.service
endef

$(eval $(golang-package))

#!/bin/sh
# Post-build for the tobe-body images, after the board's own: the data
# partition in /etc/fstab, sshd reading its drop-ins, the agent's key
# with its forced command, and the first-boot units enabled.
#
# The data partition (ext4, label tobe-data, the card's last, grown to the
# end of the card at the first boot) is mounted at /data; the body's state
# directory /var/lib/tobe-body is /data/tobe-body bound there, and the ssh
# host keys are in /data/ssh: both survive an update of the image.
set -eu
TARGET_DIR=$1

fstab=$TARGET_DIR/etc/fstab
grep -q 'LABEL=tobe-data' "$fstab" || cat >>"$fstab" <<'FSTAB'
LABEL=tobe-data	/data	ext4	defaults,noatime,x-systemd.growfs	0	2
/data/tobe-body	/var/lib/tobe-body	none	bind,x-systemd.requires=tobe-body-data-dirs.service,x-systemd.after=tobe-body-data-dirs.service	0	0
FSTAB

sshd=$TARGET_DIR/etc/ssh/sshd_config
if [ -f "$sshd" ] && ! grep -q '^Include /etc/ssh/sshd_config.d/\*.conf' "$sshd"; then
	sed -i '1i Include /etc/ssh/sshd_config.d/*.conf' "$sshd"
fi

key=$(sed -n 's/^BR2_PACKAGE_TOBE_BODY_AGENT_KEY="\(.*\)"$/\1/p' "$BR2_CONFIG")
install -d -m 0755 "$TARGET_DIR/etc/ssh/authorized_keys"
if [ -n "$key" ]; then
	printf 'restrict,command="tobe-body stdio --principal tobe-agent" %s\n' "$key" >"$TARGET_DIR/etc/ssh/authorized_keys/tobe"
	chmod 0644 "$TARGET_DIR/etc/ssh/authorized_keys/tobe"
fi

wants=$TARGET_DIR/usr/lib/systemd/system/data.mount.requires
install -d "$wants"
ln -sf ../tobe-body-grow-data.service "$wants/tobe-body-grow-data.service"

package uapi

// User-space LEDs (linux/uleds.h): a program makes an LED class device
// by writing a ULedsUserDev to /dev/uleds, and reads its brightness, as
// a native int, each time the kernel changes it.

// ULedsMaxNameSize is LED_MAX_NAME_SIZE.
const ULedsMaxNameSize = 64

// ULedsUserDev is struct uleds_user_dev.
type ULedsUserDev struct {
	Name          [ULedsMaxNameSize]byte
	MaxBrightness int32
}

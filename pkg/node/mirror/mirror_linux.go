package mirror

import (
	"errors"
	"net"

	"github.com/vishvananda/netlink"
)

// bringUp sets the device name up; false when it does not exist (yet).
func bringUp(name string) (bool, error) {
	link, err := netlink.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if link.Attrs().Flags&net.FlagUp != 0 {
		return true, nil
	}
	return true, netlink.LinkSetUp(link)
}

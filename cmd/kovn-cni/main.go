// Command kovn-cni is kovn's CNI plugin: a thin shim, exec'd by the container runtime, that
// forwards ADD, DEL and CHECK to kovn-daemon over its unix socket and prints the daemon's
// result in the CNI version the runtime asked for. All the work happens in the daemon.
package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/kovn/kovn/pkg/cni"
)

// Time limits per command. ADD waits for the controller's annotations and for OVN to
// install the port; DEL only tears down.
const (
	addTimeout    = 120 * time.Second
	delTimeout    = 30 * time.Second
	checkTimeout  = 30 * time.Second
	statusTimeout = 5 * time.Second
)

// errPluginNotAvailable is the CNI 1.1 STATUS code "cannot service ADD requests".
const errPluginNotAvailable uint = 50

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    func(args *skel.CmdArgs) error { return cmdAdd(args, os.Stdout) },
		Del:    cmdDel,
		Check:  cmdCheck,
		Status: cmdStatus,
	}, version.All, "kovn-cni: CNI shim for kovn-daemon")
}

// cmdAdd forwards ADD and prints the result in the requested version to out.
func cmdAdd(args *skel.CmdArgs, out io.Writer) error {
	conf, req, err := newRequest(cni.CmdAdd, args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), addTimeout)
	defer cancel()
	raw, err := cni.NewClient(conf.ServerSocket).Do(ctx, req)
	if err != nil {
		return err
	}
	return printResult(raw, conf.CNIVersion, out)
}

// cmdDel forwards DEL; a pod the daemon reports gone is deleted already.
func cmdDel(args *skel.CmdArgs) error {
	conf, req, err := newRequest(cni.CmdDel, args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), delTimeout)
	defer cancel()
	if _, err := cni.NewClient(conf.ServerSocket).Do(ctx, req); err != nil && !cni.IsPodNotFound(err) {
		return err
	}
	return nil
}

// cmdCheck forwards CHECK.
func cmdCheck(args *skel.CmdArgs) error {
	conf, req, err := newRequest(cni.CmdCheck, args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	_, err = cni.NewClient(conf.ServerSocket).Do(ctx, req)
	return err
}

// cmdStatus reports whether kovn-daemon answers (CNI 1.1 STATUS).
func cmdStatus(args *skel.CmdArgs) error {
	conf, err := cni.ParseNetConf(args.StdinData)
	if err != nil {
		return cni.AsCNIError(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	if err := cni.NewClient(conf.ServerSocket).Status(ctx); err != nil {
		return types.NewError(errPluginNotAvailable, err.Error(), "")
	}
	return nil
}

// newRequest builds the daemon request from the runtime's environment and stdin.
func newRequest(command string, args *skel.CmdArgs) (*cni.NetConf, *cni.Request, error) {
	conf, err := cni.ParseNetConf(args.StdinData)
	if err != nil {
		return nil, nil, cni.AsCNIError(err)
	}
	pod, err := cni.ParsePodArgs(args.Args)
	if err != nil {
		return nil, nil, cni.AsCNIError(err)
	}
	req := &cni.Request{
		Command:      command,
		ContainerID:  args.ContainerID,
		Netns:        args.Netns,
		IfName:       args.IfName,
		PodName:      pod.Name,
		PodNamespace: pod.Namespace,
		PodUID:       pod.UID,
		Config:       args.StdinData,
	}
	if err := req.Validate(); err != nil {
		return nil, nil, cni.AsCNIError(err)
	}
	return conf, req, nil
}

// printResult converts the daemon's result to cniVersion and prints it.
func printResult(raw []byte, cniVersion string, out io.Writer) error {
	result, err := current.NewResult(raw)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "decoding kovn-daemon's result: "+err.Error(), "")
	}
	if cniVersion == "" {
		cniVersion = "0.1.0" // what the spec assumes for a configuration without one
	}
	versioned, err := result.GetAsVersion(cniVersion)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion,
			"converting kovn-daemon's result to CNI version "+cniVersion+": "+err.Error(), "")
	}
	if err := versioned.PrintTo(out); err != nil {
		return types.NewError(types.ErrIOFailure, "printing the CNI result: "+err.Error(), "")
	}
	return nil
}

package kernels

import (
	"embed"
	"fmt"
)

//go:embed ptx/*.ptx
var ptxFS embed.FS

//go:embed fatbin/*.fatbin
var fatbinFS embed.FS

// Kernel names one CUDA kernel: the PTX module (one per .cu file) that
// holds it, and its entry point.
type Kernel struct {
	ID     int    // index in All, so that a backend finds its function without a map lookup
	Module string // file name under ptx/, without ".ptx"
	Entry  string // extern "C" entry point
	Args   int    // number of 8-byte arguments
}

// The kernels, one per .cu file.
var (
	Scatter       = Kernel{ID: 0, Module: "scatter", Entry: "trajring_scatter", Args: 4}
	GatherRows    = Kernel{ID: 1, Module: "gather_rows", Entry: "trajring_gather_rows", Args: 4}
	Concat        = Kernel{ID: 2, Module: "concat", Entry: "trajring_concat", Args: 5}
	GatherWindows = Kernel{ID: 3, Module: "window_gather", Entry: "trajring_gather_windows", Args: 7}
	NStepReward   = Kernel{ID: 4, Module: "nstep_reward", Entry: "trajring_nstep_reward", Args: 7}
	PatchItems    = Kernel{ID: 5, Module: "patch_items", Entry: "trajring_patch_items", Args: 9}
	DrawUniform   = Kernel{ID: 6, Module: "draw_uniform", Entry: "trajring_draw_uniform", Args: 13}
	TreePull      = Kernel{ID: 7, Module: "tree_pull", Entry: "trajring_tree_pull", Args: 4}
	TreeRepair    = Kernel{ID: 8, Module: "tree_repair", Entry: "trajring_tree_repair", Args: 4}
	DrawPrio      = Kernel{ID: 9, Module: "draw_prioritized", Entry: "trajring_draw_prioritized", Args: 15}
	UpdateClaim   = Kernel{ID: 10, Module: "update_claim", Entry: "trajring_update_claim", Args: 7}
	UpdateApply   = Kernel{ID: 11, Module: "update_apply", Entry: "trajring_update_apply", Args: 11}
	// The learner's kernels (host/gemm.h, mlp.h, td_loss.h, grad_norm.h, adam.h).
	Gemm        = Kernel{ID: 12, Module: "gemm", Entry: "trajring_gemm", Args: 9}
	BiasReLU    = Kernel{ID: 13, Module: "bias_relu", Entry: "trajring_bias_relu", Args: 5}
	ReLUGrad    = Kernel{ID: 14, Module: "relu_grad", Entry: "trajring_relu_grad", Args: 3}
	ColSum      = Kernel{ID: 15, Module: "col_sum", Entry: "trajring_col_sum", Args: 4}
	TDLoss      = Kernel{ID: 16, Module: "td_loss", Entry: "trajring_td_loss", Args: 15}
	NormPartial = Kernel{ID: 17, Module: "norm_partial", Entry: "trajring_norm_partial", Args: 4}
	NormFinish  = Kernel{ID: 18, Module: "norm_finish", Entry: "trajring_norm_finish", Args: 5}
	Adam        = Kernel{ID: 19, Module: "adam", Entry: "trajring_adam", Args: 15}
	Argmax      = Kernel{ID: 20, Module: "argmax", Entry: "trajring_argmax", Args: 4}
	// The n-step check of device-selected table transitions (host/nstep_check.h).
	NStepCheck = Kernel{ID: 21, Module: "nstep_check", Entry: "trajring_nstep_check", Args: 15}
	// The frame-stack gather of device-selected table transitions (host/stack_gather.h).
	StackGather = Kernel{ID: 22, Module: "stack_gather", Entry: "trajring_stack_gather", Args: 14}
	// The learner's fused launches (host/gemm.h, grad_norm.h): a layer's
	// three forward products, and a layer's gradients (with the global
	// gradient norm after the last layer's).
	Gemm3    = Kernel{ID: 23, Module: "gemm3", Entry: "trajring_gemm3", Args: 16}
	GemmBack = Kernel{ID: 24, Module: "gemm_back", Entry: "trajring_gemm_back", Args: 15}
	// A batch's priority updates in one block (host/tree.h): claims,
	// applies and the tree's repair.
	UpdateOne = Kernel{ID: 25, Module: "update_one", Entry: "trajring_update_one", Args: 11}
	// A learner's last layer on s and s' and its TD loss (host/gemm.h,
	// td_loss.h).
	TDHead = Kernel{ID: 26, Module: "td_head", Entry: "trajring_td_head", Args: 6}
)

// All lists every kernel.
var All = []Kernel{Scatter, GatherRows, Concat, GatherWindows, NStepReward, PatchItems, DrawUniform, TreePull, TreeRepair, DrawPrio, UpdateClaim, UpdateApply,
	Gemm, BiasReLU, ReLUGrad, ColSum, TDLoss, NormPartial, NormFinish, Adam, Argmax, NStepCheck, StackGather, Gemm3, GemmBack, UpdateOne, TDHead}

// PTX returns the PTX text of the kernel's module, compiled by `make
// kernels` for compute_80 and embedded in the binary. It is safe for
// concurrent use.
func (k Kernel) PTX() (string, error) {
	b, err := ptxFS.ReadFile("ptx/" + k.Module + ".ptx")
	if err != nil {
		return "", fmt.Errorf("kernels: no PTX for %s: %w", k.Module, err)
	}
	return string(b), nil
}

// Image returns the image the gpu backend loads for the kernel's module:
// the fatbin built by `make kernels` (SASS for sm_80 and sm_90, so the
// driver does not JIT them, and compute_80 PTX for newer devices),
// embedded in the binary. It is safe for concurrent use.
func (k Kernel) Image() (string, error) {
	b, err := fatbinFS.ReadFile("fatbin/" + k.Module + ".fatbin")
	if err != nil {
		return "", fmt.Errorf("kernels: no fatbin for %s: %w", k.Module, err)
	}
	return string(b), nil
}

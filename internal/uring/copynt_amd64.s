#include "textflag.h"

// func copyNTAVX256(dst, src *byte, n int)
// n > 0 and a multiple of 128; dst 32-byte aligned.
TEXT ·copyNTAVX256(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
avx:
	VMOVDQU	0(SI), Y0
	VMOVDQU	32(SI), Y1
	VMOVDQU	64(SI), Y2
	VMOVDQU	96(SI), Y3
	VMOVNTDQ	Y0, 0(DI)
	VMOVNTDQ	Y1, 32(DI)
	VMOVNTDQ	Y2, 64(DI)
	VMOVNTDQ	Y3, 96(DI)
	ADDQ	$128, SI
	ADDQ	$128, DI
	SUBQ	$128, CX
	JNZ	avx
	SFENCE
	VZEROUPPER
	RET

// func copyNTSSE2(dst, src *byte, n int)
// n > 0 and a multiple of 128; dst 16-byte aligned.
TEXT ·copyNTSSE2(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
sse2:
	MOVOU	0(SI), X0
	MOVOU	16(SI), X1
	MOVOU	32(SI), X2
	MOVOU	48(SI), X3
	MOVNTO	X0, 0(DI)
	MOVNTO	X1, 16(DI)
	MOVNTO	X2, 32(DI)
	MOVNTO	X3, 48(DI)
	MOVOU	64(SI), X0
	MOVOU	80(SI), X1
	MOVOU	96(SI), X2
	MOVOU	112(SI), X3
	MOVNTO	X0, 64(DI)
	MOVNTO	X1, 80(DI)
	MOVNTO	X2, 96(DI)
	MOVNTO	X3, 112(DI)
	ADDQ	$128, SI
	ADDQ	$128, DI
	SUBQ	$128, CX
	JNZ	sse2
	SFENCE
	RET

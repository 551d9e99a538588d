#include "textflag.h"

// func accumStripesAVX2(acc *[8]uint64, data unsafe.Pointer, secret unsafe.Pointer, stripes int)
//
// XXH3's stripe accumulation for `stripes` consecutive 64-byte stripes, the
// secret advancing 8 bytes per stripe: for each 64-bit lane i,
// acc[i] += data[i^1] + lo32(data[i]^secret[i]) * hi32(data[i]^secret[i]).
TEXT ·accumStripesAVX2(SB), NOSPLIT, $0-32
	MOVQ    acc+0(FP), AX
	MOVQ    data+8(FP), CX
	MOVQ    secret+16(FP), DX
	MOVQ    stripes+24(FP), BX
	VMOVDQU (AX), Y1
	VMOVDQU 32(AX), Y2
	TESTQ   BX, BX
	JZ      done

loop:
	VMOVDQU  (CX), Y3
	VMOVDQU  32(CX), Y4
	VPXOR    (DX), Y3, Y5
	VPXOR    32(DX), Y4, Y6
	VPSRLQ   $32, Y5, Y7
	VPSRLQ   $32, Y6, Y8
	VPMULUDQ Y5, Y7, Y5
	VPMULUDQ Y6, Y8, Y6
	VPSHUFD  $0x4e, Y3, Y3
	VPSHUFD  $0x4e, Y4, Y4
	VPADDQ   Y3, Y1, Y1
	VPADDQ   Y4, Y2, Y2
	VPADDQ   Y5, Y1, Y1
	VPADDQ   Y6, Y2, Y2
	ADDQ     $64, CX
	ADDQ     $8, DX
	DECQ     BX
	JNZ      loop

done:
	VMOVDQU Y1, (AX)
	VMOVDQU Y2, 32(AX)
	VZEROUPPER
	RET

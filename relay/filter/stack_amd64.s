//go:build amd64 && !purego && !race

#include "textflag.h"

// func hitsAVX2(rows *uint64, ps *StackProbe, n int, chunks int, masks *uint32)
//
// A StackProbe is 32 bytes: the word index of its two rows at 0 and 8,
// its fingerprint at 16. masks[k] holds the columns asked of probe k on
// entry, those of them that hold its fingerprint on return.
TEXT ·hitsAVX2(SB), NOSPLIT, $0-40
	MOVQ rows+0(FP), R8
	MOVQ ps+8(FP), SI
	MOVQ n+16(FP), R9
	MOVQ chunks+24(FP), R10
	MOVQ masks+32(FP), DI
	TESTQ R9, R9
	JZ   done

	// Prefetch both rows of every probe, the lines that hold a column
	// asked for (a line is 8 columns), so that their misses are in flight
	// together.
	MOVQ SI, R12
	MOVQ DI, R15
	MOVQ R9, R13

prefetch:
	MOVL       (R15), R11 // the columns asked
	MOVQ       0(R12), AX
	LEAQ       (R8)(AX*8), AX
	MOVQ       8(R12), BX
	LEAQ       (R8)(BX*8), BX
	CMPQ       R10, $2
	JLE        firstline // a row of one line or less
	TESTL      $0xff, R11
	JZ         secondline

firstline:
	PREFETCHT0 (AX)
	PREFETCHT0 (BX)
	CMPQ       R10, $2
	JLE        prefetched

secondline:
	TESTL      $0xff00, R11
	JZ         prefetched
	PREFETCHT0 64(AX)
	PREFETCHT0 64(BX)

prefetched:
	ADDQ $32, R12
	ADDQ $4, R15
	DECQ R13
	JNZ  prefetch

	VPXOR Y7, Y7, Y7

probe:
	MOVQ         0(SI), AX
	LEAQ         (R8)(AX*8), AX // row a
	MOVQ         8(SI), BX
	LEAQ         (R8)(BX*8), BX // row b
	MOVWLZX      16(SI), DX
	MOVQ         DX, X0
	VPBROADCASTW X0, Y0         // the fingerprint in every 16-bit lane
	MOVL         (DI), R11      // the columns asked
	XORL         R14, R14       // the probe's mask
	XORL         CX, CX         // the column of this chunk's first word
	MOVQ         R10, R13

chunk:
	MOVL      R11, DX
	SHRL      CX, DX
	TESTL     $15, DX
	JZ        nextchunk    // no column of this chunk asked for: not read
	VPCMPEQW  (AX), Y0, Y1 // lanes of a's four words that hold it
	VPCMPEQW  (BX), Y0, Y2 // and of b's
	VPOR      Y2, Y1, Y1
	VPCMPEQQ  Y7, Y1, Y1   // words of neither row holding it
	VMOVMSKPD Y1, DX
	XORL      $15, DX      // words of either row holding it
	SHLL      CX, DX
	ORL       DX, R14

nextchunk:
	ADDQ      $32, AX
	ADDQ      $32, BX
	ADDL      $4, CX
	DECQ      R13
	JNZ       chunk

	ANDL R11, R14
	MOVL R14, (DI)
	ADDQ $32, SI
	ADDQ $4, DI
	DECQ R9
	JNZ  probe

	VZEROUPPER

done:
	RET

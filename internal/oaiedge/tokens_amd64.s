#include "textflag.h"

// Broadcast constants (one 8-byte pattern each, loaded with VPBROADCASTQ).
DATA idsAscii0<>+0(SB)/8, $0x3030303030303030
GLOBL idsAscii0<>(SB), RODATA|NOPTR, $8
DATA idsNine<>+0(SB)/8, $0x0909090909090909
GLOBL idsNine<>(SB), RODATA|NOPTR, $8
DATA idsComma<>+0(SB)/8, $0x2C2C2C2C2C2C2C2C
GLOBL idsComma<>(SB), RODATA|NOPTR, $8
// Byte pairs (10, 1): the first digit of a pair is the more significant.
DATA idsTens<>+0(SB)/8, $0x010A010A010A010A
GLOBL idsTens<>(SB), RODATA|NOPTR, $8
// Word pairs (100, 1).
DATA idsHundreds<>+0(SB)/8, $0x0001006400010064
GLOBL idsHundreds<>(SB), RODATA|NOPTR, $8
// Word pairs (10000, 1).
DATA idsTenThousands<>+0(SB)/8, $0x0001271000012710
GLOBL idsTenThousands<>(SB), RODATA|NOPTR, $8

// func plainIDsAVX2(dst unsafe.Pointer, limit, space int, b unsafe.Pointer, n, s int) (count, next int)
//
// See plainRunFast (tokens_amd64.go) for the contract. Registers:
// AX count, BX window start s, DX n, SI b, DI dst, R8 limit, R9 space,
// R10 commas of the window, R11 digits, R12 zeros / lane base,
// R13 bad positions, R14 starts / ids in the window, CX scratch.
TEXT ·plainIDsAVX2(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ limit+8(FP), R8
	MOVQ space+16(FP), R9
	MOVQ b+24(FP), SI
	MOVQ n+32(FP), DX
	MOVQ s+40(FP), BX
	XORQ AX, AX

	VPBROADCASTQ idsAscii0<>(SB), Y15
	VPBROADCASTQ idsNine<>(SB), Y14
	VPBROADCASTQ idsComma<>(SB), Y13
	VPBROADCASTQ idsTens<>(SB), Y12
	VPBROADCASTQ idsHundreds<>(SB), Y11
	VPBROADCASTQ idsTenThousands<>(SB), Y10
	VPCMPEQB     Y9, Y9, Y9 // all ones
	VPXOR        Y8, Y8, Y8 // zero

window:
	LEAQ 64(BX), CX
	CMPQ CX, DX
	JGT  done

	// Classify the 64 bytes at s: commas, digits and '0' digits.
	VMOVDQU   (SI)(BX*1), Y0
	VMOVDQU   32(SI)(BX*1), Y1
	VPCMPEQB  Y13, Y0, Y2
	VPCMPEQB  Y13, Y1, Y3
	VPMOVMSKB Y2, R10
	VPMOVMSKB Y3, CX
	SHLQ      $32, CX
	ORQ       CX, R10
	VPSUBB    Y15, Y0, Y2
	VPSUBB    Y15, Y1, Y3
	VPMINUB   Y14, Y2, Y4
	VPMINUB   Y14, Y3, Y5
	VPCMPEQB  Y4, Y2, Y4
	VPCMPEQB  Y5, Y3, Y5
	VPMOVMSKB Y4, R11
	VPMOVMSKB Y5, CX
	SHLQ      $32, CX
	ORQ       CX, R11
	VPCMPEQB  Y8, Y2, Y6
	VPCMPEQB  Y8, Y3, Y7
	VPMOVMSKB Y6, R12
	VPMOVMSKB Y7, CX
	SHLQ      $32, CX
	ORQ       CX, R12

	// bad: bytes that are neither digit nor comma, empty elements (an id
	// start that is a comma), leading zeros (a '0' start followed by a
	// digit) and starts of digit runs of eight or more.
	MOVQ R11, R13
	ORQ  R10, R13
	NOTQ R13
	LEAQ 1(R10)(R10*1), R14 // starts: after every comma, and s itself
	MOVQ R14, CX
	ANDQ R10, CX
	ORQ  CX, R13
	MOVQ R11, CX
	SHRQ $1, CX
	ANDQ R14, CX
	ANDQ R12, CX
	ORQ  CX, R13
	MOVQ R11, CX
	SHRQ $1, CX
	ANDQ R11, CX
	MOVQ CX, R12
	SHRQ $2, R12
	ANDQ R12, CX
	MOVQ CX, R12
	SHRQ $4, R12
	ANDQ R12, CX
	ORQ  CX, R13

	// Keep the commas before the first bad position: each ends a plain id
	// that lies wholly before it.
	MOVQ R13, CX
	NEGQ CX
	ANDQ R13, CX
	DECQ CX
	ANDQ CX, R10
	JZ   done

	POPCNTQ R10, R14
	LEAQ    (AX)(R14*1), CX
	CMPQ    CX, R8
	JGT     done
	ADDQ    $8, CX
	CMPQ    CX, R9
	JGT     done

	BSRQ R10, R11
	LEAQ 1(BX)(R11*1), R11   // the next window starts after the last comma
	LEAQ -8(SI)(BX*1), R12   // lane base: the 8 bytes before a comma

group:
	// Eight lanes, each the 8 bytes that end just before a comma, so an
	// id's digits are the lane's high bytes. Once the commas run out,
	// TZCNT gives 64 and the spare lanes read the window's last 8 bytes.
	TZCNTQ      R10, CX
	BLSRQ       R10, R10
	VMOVQ       (R12)(CX*1), X0
	TZCNTQ      R10, CX
	BLSRQ       R10, R10
	VPINSRQ     $1, (R12)(CX*1), X0, X0
	TZCNTQ      R10, CX
	BLSRQ       R10, R10
	VMOVQ       (R12)(CX*1), X4
	TZCNTQ      R10, CX
	BLSRQ       R10, R10
	VPINSRQ     $1, (R12)(CX*1), X4, X4
	VINSERTI128 $1, X4, Y0, Y0
	TZCNTQ      R10, CX
	BLSRQ       R10, R10
	VMOVQ       (R12)(CX*1), X1
	TZCNTQ      R10, CX
	BLSRQ       R10, R10
	VPINSRQ     $1, (R12)(CX*1), X1, X1
	TZCNTQ      R10, CX
	BLSRQ       R10, R10
	VMOVQ       (R12)(CX*1), X5
	TZCNTQ      R10, CX
	BLSRQ       R10, R10
	VPINSRQ     $1, (R12)(CX*1), X5, X5
	VINSERTI128 $1, X5, Y1, Y1

	// Digit values, with every byte at or below a lane's highest
	// non-digit (the separator before the id, and what precedes it)
	// cleared: smearing the non-digit mask down by 1, 2 and 4 bytes.
	VPSUBB   Y15, Y0, Y0
	VPSUBB   Y15, Y1, Y1
	VPMINUB  Y14, Y0, Y2
	VPMINUB  Y14, Y1, Y3
	VPCMPEQB Y2, Y0, Y2
	VPCMPEQB Y3, Y1, Y3
	VPXOR    Y9, Y2, Y2
	VPXOR    Y9, Y3, Y3
	VPSRLQ   $8, Y2, Y4
	VPSRLQ   $8, Y3, Y5
	VPOR     Y4, Y2, Y2
	VPOR     Y5, Y3, Y3
	VPSRLQ   $16, Y2, Y4
	VPSRLQ   $16, Y3, Y5
	VPOR     Y4, Y2, Y2
	VPOR     Y5, Y3, Y3
	VPSRLQ   $32, Y2, Y4
	VPSRLQ   $32, Y3, Y5
	VPOR     Y4, Y2, Y2
	VPOR     Y5, Y3, Y3
	VPANDN   Y0, Y2, Y0
	VPANDN   Y1, Y3, Y1

	// Combine digits: pairs (x10), quads (x100), then the two 4-digit
	// halves of each lane (x10000), and put the eight ids in order.
	VPMADDUBSW Y12, Y0, Y0
	VPMADDUBSW Y12, Y1, Y1
	VPMADDWD   Y11, Y0, Y0
	VPMADDWD   Y11, Y1, Y1
	VPACKUSDW  Y1, Y0, Y0
	VPMADDWD   Y10, Y0, Y0
	VPERMQ     $0xD8, Y0, Y0
	VMOVDQU    Y0, (DI)(AX*4)

	CMPQ R14, $8
	JLE  last
	ADDQ $8, AX
	SUBQ $8, R14
	JMP  group

last:
	ADDQ R14, AX
	MOVQ R11, BX
	JMP  window

done:
	VZEROUPPER
	MOVQ AX, count+48(FP)
	MOVQ BX, next+56(FP)
	RET

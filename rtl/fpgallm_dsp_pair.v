// Two int8 x int8 products sharing the activation operand in one DSP48E2 (Xilinx WP486):
//   P = (w_hi * 2^18 + w_lo) * x            (pre-adder D + A, multiplier AD x B)
// Four register stages, all enabled by ce: A/D/B input registers, AD (and B2), M, P.
// The caller splits P: lo = P[17:0] (signed), hi = P[35:18] + P[17] (sign correction).
//
// With FPGALLM_XILINX_DSP defined (the Yosys script defines it) the DSP48E2 primitive is
// instantiated with its internal registers, because Yosys 0.23 packs no registers into
// DSP48E2 (only into DSP48E1) and would otherwise count them as fabric flip-flops.
// Attributes from UG579: INMODE = 00100 selects (D + A2) * B2, AMULTSEL = "AD",
// OPMODE = 000_000_01_01 routes M to P. Without it (Verilator) the same four stages are
// written behaviourally; the primitive's configuration is not simulated here (no DSP48E2
// simulation model ships with Yosys 0.23 or Verilator).
module fpgallm_dsp_pair (
  input  wire              clk,
  input  wire              ce,
  input  wire signed [7:0] w_hi,
  input  wire signed [7:0] w_lo,
  input  wire signed [7:0] x,
  output wire [35:0]       p
);
`ifdef FPGALLM_XILINX_DSP
  wire [47:0] p48;
  DSP48E2 #(
    .AMULTSEL("AD"), .BMULTSEL("B"), .PREADDINSEL("A"), .USE_MULT("MULTIPLY"),
    .A_INPUT("DIRECT"), .B_INPUT("DIRECT"),
    .AREG(1), .ACASCREG(1), .BREG(2), .BCASCREG(2), .DREG(1), .ADREG(1), .MREG(1), .PREG(1),
    .CREG(0), .INMODEREG(0), .OPMODEREG(0), .ALUMODEREG(0), .CARRYINREG(0), .CARRYINSELREG(0)
  ) dsp (
    .CLK(clk),
    .A({{4{w_hi[7]}}, w_hi, 18'b0}),        // w_hi * 2^18, sign-extended to 30 bits
    .B({{10{x[7]}}, x}),
    .D({{19{w_lo[7]}}, w_lo}),
    .C(48'b0),
    .INMODE(5'b00100), .OPMODE(9'b000000101), .ALUMODE(4'b0000),
    .CARRYIN(1'b0), .CARRYINSEL(3'b000),
    .CEA1(ce), .CEA2(ce), .CEB1(ce), .CEB2(ce), .CED(ce), .CEAD(ce), .CEM(ce), .CEP(ce),
    .CEC(1'b0), .CECARRYIN(1'b0), .CECTRL(1'b0), .CEINMODE(1'b0), .CEALUMODE(1'b0),
    .RSTA(1'b0), .RSTB(1'b0), .RSTC(1'b0), .RSTD(1'b0), .RSTM(1'b0), .RSTP(1'b0),
    .RSTALLCARRYIN(1'b0), .RSTALUMODE(1'b0), .RSTCTRL(1'b0), .RSTINMODE(1'b0),
    .ACIN(30'b0), .BCIN(18'b0), .PCIN(48'b0), .CARRYCASCIN(1'b0), .MULTSIGNIN(1'b0),
    .P(p48)
  );
  assign p = p48[35:0];
`else
  reg signed [26:0] a1, d1, ad;
  reg signed [7:0] b1, b2;
  reg signed [35:0] m, pr;
  always @(posedge clk)
    if (ce) begin
      a1 <= {w_hi[7], w_hi, 18'b0};
      d1 <= {{19{w_lo[7]}}, w_lo};
      b1 <= x;
      ad <= d1 + a1;
      b2 <= b1;
      m <= ad * b2;
      pr <= m;
    end
  assign p = pr;
`endif
endmodule

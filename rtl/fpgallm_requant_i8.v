// fpgallm requantizer: int32 accumulators -> int8 codes, Verilog-2005.
//
// The static requantization of kernels::requantize_i8 (src/kernels/matrix_unit.hpp) for
// PE rows at a time, bit-exact with it:
//   q = sat(rne(((float(acc) * s_w) * s_x) * inv), 127)
// in IEEE-754 binary32 with round-to-nearest-even at every step (the int32 -> float
// conversion and each of the three multiplications; subnormals kept, overflow to
// infinity), then saturate_round_i8 (kernels/numerics.hpp): NaN -> 0, clamp to
// [-127, 127], round half to even. inv is the configuration word cfg_inv_out_scale, the
// reciprocal the C model computes once per call (`out_scale == 0 ? 0 : 1 / out_scale`);
// with inv = 0 every code is 0, as in the C model.
//
// Streams (valid/ready; a transfer when both are high at a clock edge):
//   a_*  PE int32 accumulators, row p at bit 32p (the matrix unit's y stream);
//   s_*  PE binary32 row scales s_w, row p at bit 32p, one word per accumulator word;
//   q_*  PE int8 codes, row p at bit 8p.
// cfg_x_scale and cfg_inv_out_scale (binary32 bits) are held constant during an instruction.
//
// Pipeline: int -> float, x s_w, x s_x, x inv and saturation: a code word is valid
// LATENCY = 4 clock edges after the edge that accepted its accumulator word (no stall).
// One clock enable stalls every stage while a code word waits for q_ready.
module fpgallm_requant_i8 #(
  parameter integer PE = 4
) (
  input  wire            clk,
  input  wire            rst,                 // synchronous, active high
  input  wire [31:0]     cfg_x_scale,
  input  wire [31:0]     cfg_inv_out_scale,
  input  wire [PE*32-1:0] a_data,
  input  wire            a_valid,
  output wire            a_ready,
  input  wire [PE*32-1:0] s_data,
  input  wire            s_valid,
  output wire            s_ready,
  output reg  [PE*8-1:0] q_data,
  output reg             q_valid,
  input  wire            q_ready
);
  // int32 -> binary32, round to nearest even (cvtsi2ss).
  function [31:0] i2f;
    input [31:0] a;
    reg [31:0] mag, norm;
    reg [23:0] m;
    integer lz, i;
    reg up;
    begin
      mag = a[31] ? (~a + 1'b1) : a;   // |-2^31| = 2^31 fits unsigned
      if (mag == 0) begin
        i2f = 32'd0;
      end else begin
        lz = 0;
        for (i = 31; i >= 0; i = i - 1)
          if (mag[i] && lz == 0) lz = 32 - i;   // 1 + leading zeros
        lz = lz - 1;
        norm = mag << lz;
        up = norm[7] && ((|norm[6:0]) || norm[8]);
        // {exponent, fraction} + up: a carry out of the fraction raises the exponent.
        m = {1'b0, norm[30:8]} + {23'd0, up};
        i2f = {a[31], 8'd0, 23'd0} + {1'b0, 8'd158 - lz[7:0], 23'd0} + {8'd0, m};
      end
    end
  endfunction

  // binary32 x binary32, round to nearest even, subnormal inputs and outputs, overflow to
  // infinity. A NaN result is the quiet NaN 0x7fc00000 (its payload never reaches a code).
  function [31:0] fmul;
    input [31:0] a;
    input [31:0] b;
    reg sign, a_nan, b_nan, a_inf, b_inf, a_zero, b_zero, g, st, up;
    reg [23:0] ma, mb;
    reg [47:0] p, pn, t;
    reg [30:0] field;
    integer ea, eb, e, lz, i, k;
    begin
      sign = a[31] ^ b[31];
      a_nan = a[30:23] == 8'hff && a[22:0] != 0;
      b_nan = b[30:23] == 8'hff && b[22:0] != 0;
      a_inf = a[30:23] == 8'hff && a[22:0] == 0;
      b_inf = b[30:23] == 8'hff && b[22:0] == 0;
      a_zero = a[30:0] == 0;
      b_zero = b[30:0] == 0;
      if (a_nan || b_nan || (a_inf && b_zero) || (a_zero && b_inf)) begin
        fmul = 32'h7fc00000;
      end else if (a_inf || b_inf) begin
        fmul = {sign, 8'hff, 23'd0};
      end else if (a_zero || b_zero) begin
        fmul = {sign, 31'd0};
      end else begin
        ma = {a[30:23] != 0, a[22:0]};
        mb = {b[30:23] != 0, b[22:0]};
        ea = a[30:23] == 0 ? 1 : {24'd0, a[30:23]};
        eb = b[30:23] == 0 ? 1 : {24'd0, b[30:23]};
        p = ma * mb;                       // value p * 2^(ea + eb - 300)
        lz = 0;
        for (i = 47; i >= 0; i = i - 1)
          if (p[i] && lz == 0) lz = 48 - i;
        lz = lz - 1;
        pn = p << lz;                      // bit 47 set: value (pn / 2^47) * 2^(e - 127)
        e = ea + eb - 126 - lz;            // biased exponent of the result
        if (e >= 255) begin
          fmul = {sign, 8'hff, 23'd0};
        end else begin
          if (e >= 1) begin
            field = {e[7:0], pn[46:24]};
            g = pn[23];
            st = |pn[22:0];
          end else begin                   // subnormal: shift right by 1 - e more
            k = 1 - e;
            if (k > 48) begin
              t = 48'd0;
              st = 1'b1;
            end else begin
              t = pn >> k;
              st = 1'b0;
              for (i = 0; i < 48; i = i + 1)
                if (i < k && pn[i]) st = 1'b1;
            end
            field = {8'd0, t[46:24]};
            g = t[23];
            st = st || (|t[22:0]);
          end
          up = g && (st || field[0]);
          fmul = {sign, field + {30'd0, up}};   // a carry reaches the exponent (or infinity)
        end
      end
    end
  endfunction

  // kernels::saturate_round_i8: NaN -> 0, clamp to [-127, 127], round half to even.
  function [7:0] sat_round;
    input [31:0] v;
    reg [23:0] m, sh;
    reg [7:0] r;
    reg g, st;
    integer e, k, i;
    begin
      e = {24'd0, v[30:23]};
      if (e == 255 && v[22:0] != 0) begin
        r = 8'd0;
      end else if (e >= 134) begin          // |v| >= 128 or infinite
        r = 8'd127;
      end else if (e < 126) begin           // |v| < 0.5
        r = 8'd0;
      end else begin
        m = {1'b1, v[22:0]};
        k = 150 - e;                        // 17 .. 24: value m / 2^k
        sh = m >> k;
        r = sh[7:0];
        g = m[k - 1];
        st = 1'b0;
        for (i = 0; i < 24; i = i + 1)
          if (i < k - 1 && m[i]) st = 1'b1;
        r = r + {7'd0, g && (st || r[0])};
        if (r > 8'd127) r = 8'd127;
      end
      sat_round = v[31] ? (~r + 1'b1) : r;
    end
  endfunction

  wire en = !(q_valid && !q_ready);
  wire fire = en && a_valid && s_valid;
  assign a_ready = en && s_valid;
  assign s_ready = en && a_valid;

  reg [PE*32-1:0] f1, w1, v2, v3;
  reg valid1, valid2, valid3;
  genvar gp;
  generate
    for (gp = 0; gp < PE; gp = gp + 1) begin : g_row
      always @(posedge clk)
        if (en) begin
          f1[gp*32 +: 32] <= i2f(a_data[gp*32 +: 32]);
          w1[gp*32 +: 32] <= s_data[gp*32 +: 32];
          v2[gp*32 +: 32] <= fmul(f1[gp*32 +: 32], w1[gp*32 +: 32]);
          v3[gp*32 +: 32] <= fmul(v2[gp*32 +: 32], cfg_x_scale);
          q_data[gp*8 +: 8] <= sat_round(fmul(v3[gp*32 +: 32], cfg_inv_out_scale));
        end
    end
  endgenerate

  always @(posedge clk) begin
    if (rst) begin
      valid1 <= 1'b0; valid2 <= 1'b0; valid3 <= 1'b0; q_valid <= 1'b0;
    end else if (en) begin
      valid1 <= fire;
      valid2 <= valid1;
      valid3 <= valid2;
      q_valid <= valid3;
    end
  end
endmodule

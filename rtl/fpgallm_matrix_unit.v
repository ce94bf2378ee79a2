// fpgallm matrix unit (matrix-vector), Verilog-2005.
//
// acc[r] = sum_c W[r][c] * x[c] for one activation vector x (a decode GEMV instruction),
// PE output rows x SIMD input columns per cycle, int8 activations, int8 or int4 weights,
// int32 accumulators. The same fold and tile order as kernels::matmul_w8a8 /
// matmul_w4a8 (src/kernels/matrix_unit.hpp): tiles of TILE_ROWS x TILE_COLS, row tile by
// row tile, the column tiles of one row tile in order; inside a tile the row fold
// (PE rows at a time) outside the column fold (SIMD columns at a time).
//
// DSP packing (Xilinx WP486): the weights of two neighbouring PE rows share one DSP48E2
// and its activation operand:
//   (w_hi * 2^18 + w_lo) * x = (w_hi * x) * 2^18 + (w_lo * x)
// The low product is P[17:0] read as signed; the high product is P[35:18] plus P[17], the
// sign-correction term (a negative low product borrows one from the upper field).
//
// Streams (AXI-Stream style valid/ready; a transfer when both are high at a clock edge):
//   w_*  one word per cycle step: PE rows x SIMD weights, row p column k at bit
//        (p * SIMD + k) * WBITS. int8: two's complement. int4: the kernel's code
//        nibble - 8 (offset binary), as packed in quant files.
//   x_*  SIMD activations (int8), column k at bit 8k: the column slab of the current
//        tile, once per tile (the unit keeps it for the other row steps of the tile).
//   y_*  PE int32 accumulators, row p at bit 32p, one word per finished row step:
//        GROUP_COLS = 0: after the last column of the matrix (acc over all columns);
//        GROUP_COLS = g: at the end of every g-column group and at the matrix's last
//        column (the int4 kernel's per-group accumulators, scaled downstream).
// cfg_row_steps = ceil(rows / PE), cfg_col_steps = ceil(cols / SIMD); held constant during
// an instruction. Padding rows and columns carry zero weights.
//
// Pipeline: the DSP48E2's four stages (A/D/B, AD, M, P), log2(SIMD) adder-tree stages,
// the accumulator/output register: a result word is valid LATENCY = 5 + log2(SIMD)
// clock edges after the edge that accepted its last weight word (no stall). One global
// clock enable stalls every stage while a result waits for y_ready.
module fpgallm_matrix_unit #(
  parameter integer PE = 4,
  parameter integer SIMD = 8,
  parameter integer WBITS = 8,        // 8 or 4
  parameter integer TILE_ROWS = 8,    // multiple of PE
  parameter integer TILE_COLS = 16,   // multiple of SIMD
  parameter integer GROUP_COLS = 0,   // 0 (whole rows) or a power-of-two multiple of SIMD
  parameter integer CNT_BITS = 16
) (
  input  wire                       clk,
  input  wire                       rst,            // synchronous, active high
  input  wire [CNT_BITS-1:0]        cfg_row_steps,
  input  wire [CNT_BITS-1:0]        cfg_col_steps,
  input  wire [PE*SIMD*WBITS-1:0]   w_data,
  input  wire                       w_valid,
  output wire                       w_ready,
  input  wire [SIMD*8-1:0]          x_data,
  input  wire                       x_valid,
  output wire                       x_ready,
  output reg  [PE*32-1:0]           y_data,
  output reg                        y_valid,
  input  wire                       y_ready
);
  function integer clog2;
    input integer v;
    integer n;
    begin
      n = 0;
      while ((1 << n) < v) n = n + 1;
      clog2 = n;
    end
  endfunction

  // Bit offset of adder-tree level l in `tree` (level j holds SIMD >> j sums of PW + j bits).
  function integer tree_off;
    input integer l;
    integer j;
    begin
      tree_off = 0;
      for (j = 1; j < l; j = j + 1) tree_off = tree_off + (SIMD >> j) * (PW + j);
    end
  endfunction

  localparam integer TILE_RSTEPS = TILE_ROWS / PE;
  localparam integer TILE_CSTEPS = TILE_COLS / SIMD;
  localparam integer LOG_SIMD = clog2(SIMD);
  localparam integer PW = WBITS + 8;              // product width (signed)
  localparam integer SW = PW + LOG_SIMD;          // dot-product width
  localparam integer GROUP_STEPS = GROUP_COLS / SIMD;
  localparam integer LOG_GROUP = GROUP_COLS == 0 ? 0 : clog2(GROUP_STEPS);
  localparam integer PAIRS = (PE + 1) / 2;
  localparam integer FLIP = WBITS == 4 ? 8 : 0;                    // int4 code = nibble - 8
  localparam [WBITS-1:0] CODE_FLIP = FLIP[WBITS-1:0];
  localparam integer XI = TILE_CSTEPS > 1 ? clog2(TILE_CSTEPS) : 1;  // xbuf index bits
  localparam integer AI = TILE_RSTEPS > 1 ? clog2(TILE_RSTEPS) : 1;  // accmem index bits

  // ---------------------------------------------------------------- issue (loop nest)
  reg [CNT_BITS-1:0] rbase, cbase;   // first row step / column step of the current tile
  reg [CNT_BITS-1:0] rf, cf;         // row step / column step inside the tile
  wire [CNT_BITS-1:0] rleft = cfg_row_steps - rbase;
  wire [CNT_BITS-1:0] cleft = cfg_col_steps - cbase;
  localparam [CNT_BITS-1:0] TRS = TILE_RSTEPS[CNT_BITS-1:0];
  localparam [CNT_BITS-1:0] TCS = TILE_CSTEPS[CNT_BITS-1:0];
  wire [CNT_BITS-1:0] tile_rsteps = rleft < TRS ? rleft : TRS;
  wire [CNT_BITS-1:0] tile_csteps = cleft < TCS ? cleft : TCS;
  wire [CNT_BITS-1:0] gcol = cbase + cf;    // column step in the matrix
  wire last_c = cf == tile_csteps - 1'b1;
  wire last_r = rf == tile_rsteps - 1'b1;
  wire last_ct = cbase + tile_csteps == cfg_col_steps;
  wire last_rt = rbase + tile_rsteps == cfg_row_steps;
  wire need_x = rf == 0;
  wire first_acc, last_acc;
  generate
    if (GROUP_COLS == 0) begin : g_whole
      assign first_acc = gcol == 0;
    end else if (LOG_GROUP == 0) begin : g_step
      assign first_acc = 1'b1;
    end else begin : g_group
      assign first_acc = gcol[LOG_GROUP-1:0] == 0;
    end
    if (GROUP_COLS == 0 || LOG_GROUP == 0) begin : g_last
      assign last_acc = (GROUP_COLS != 0) || gcol == cfg_col_steps - 1'b1;
    end else begin : g_glast
      assign last_acc = (&gcol[LOG_GROUP-1:0]) || gcol == cfg_col_steps - 1'b1;
    end
  endgenerate

  wire en;                                   // the whole pipeline advances
  wire fire = en && w_valid && (!need_x || x_valid);
  assign w_ready = en && (!need_x || x_valid);
  assign x_ready = en && need_x && w_valid;

  reg [SIMD*8-1:0] xbuf [0:TILE_CSTEPS-1];
  wire [SIMD*8-1:0] x_word = need_x ? x_data : xbuf[cf[XI-1:0]];

  always @(posedge clk) begin
    if (rst) begin
      rbase <= 0; cbase <= 0; rf <= 0; cf <= 0;
    end else if (fire) begin
      if (need_x) xbuf[cf[XI-1:0]] <= x_data;
      if (!last_c) cf <= cf + 1'b1;
      else begin
        cf <= 0;
        if (!last_r) rf <= rf + 1'b1;
        else begin
          rf <= 0;
          if (!last_ct) cbase <= cbase + TCS;
          else begin
            cbase <= 0;
            rbase <= last_rt ? {CNT_BITS{1'b0}} : rbase + TRS;
          end
        end
      end
    end
  end

  // Control travelling with each step: valid, row step in tile, first/last of the
  // accumulation, first/last column step of the tile.
  localparam integer CW = CNT_BITS + 5;
  wire [CW-1:0] ctrl0 = {fire, rf, first_acc, last_acc, cf == 0, last_c};
  localparam integer DEPTH = 4 + LOG_SIMD;   // stages before the accumulator
  reg [CW-1:0] ctrl [0:DEPTH-1];
  integer s;
  always @(posedge clk) begin
    if (rst) begin
      for (s = 0; s < DEPTH; s = s + 1) ctrl[s] <= 0;
    end else if (en) begin
      ctrl[0] <= ctrl0;
      for (s = 1; s < DEPTH; s = s + 1) ctrl[s] <= ctrl[s - 1];
    end
  end

  function signed [7:0] weight;   // weight (p, k) of a word as a signed int8
    input [PE*SIMD*WBITS-1:0] word;
    input integer idx;
    reg signed [WBITS-1:0] code;
    begin
      code = word[idx*WBITS +: WBITS] ^ CODE_FLIP;
      weight = code;                // sign-extends
    end
  endfunction

  // ---------------------------------------------------------------- stages 2-3: DSPs
  // Per (row pair, column) one DSP48E2 (fpgallm_dsp_pair): four register stages.
  wire [PE*SIMD*PW-1:0] prod;   // product (p, k) at (p * SIMD + k) * PW
  wire [PE*SW-1:0] dots;        // dot product of row p at p * SW
  genvar gp, gk, gl, gi;
  generate
    for (gp = 0; gp < PAIRS; gp = gp + 1) begin : g_pair
      for (gk = 0; gk < SIMD; gk = gk + 1) begin : g_col
        wire signed [7:0] w_lo = weight(w_data, (2 * gp) * SIMD + gk);
        wire signed [7:0] w_hi;
        if (2 * gp + 1 < PE) begin : g_two
          assign w_hi = weight(w_data, (2 * gp + 1) * SIMD + gk);
        end else begin : g_one
          assign w_hi = 8'sd0;
        end
        /* verilator lint_off UNUSEDSIGNAL */
        wire [35:0] p;
        /* verilator lint_on UNUSEDSIGNAL */
        fpgallm_dsp_pair dsp (.clk(clk), .ce(en), .w_hi(w_hi), .w_lo(w_lo), .x(x_word[gk*8 +: 8]), .p(p));
        wire [PW-1:0] lo = p[PW-1:0];
        wire [PW-1:0] hi = p[18 +: PW] + {{(PW-1){1'b0}}, p[17]};   // WP486 sign correction
        assign prod[((2 * gp) * SIMD + gk) * PW +: PW] = lo;
        if (2 * gp + 1 < PE) begin : g_hi
          assign prod[((2 * gp + 1) * SIMD + gk) * PW +: PW] = hi;
        end
      end
    end

    // ---------------------------------------------------------------- adder trees
    for (gp = 0; gp < PE; gp = gp + 1) begin : g_pe
      wire [SW-1:0] dot;
      assign dots[gp*SW +: SW] = dot;
      if (LOG_SIMD == 0) begin : g_one
        assign dot = prod[gp*PW +: PW];
      end else begin : g_tree
        reg [tree_off(LOG_SIMD + 1)-1:0] tree;   // levels 1 .. LOG_SIMD, registered
        for (gl = 1; gl <= LOG_SIMD; gl = gl + 1) begin : g_lvl
          for (gi = 0; gi < (SIMD >> gl); gi = gi + 1) begin : g_node
            wire signed [PW+gl-2:0] a, c;
            if (gl == 1) begin : g_leaf
              assign a = prod[(gp * SIMD + 2 * gi) * PW +: PW];
              assign c = prod[(gp * SIMD + 2 * gi + 1) * PW +: PW];
            end else begin : g_inner
              assign a = tree[tree_off(gl - 1) + (2 * gi) * (PW + gl - 1) +: PW + gl - 1];
              assign c = tree[tree_off(gl - 1) + (2 * gi + 1) * (PW + gl - 1) +: PW + gl - 1];
            end
            always @(posedge clk)
              if (en) tree[tree_off(gl) + gi * (PW + gl) +: PW + gl] <= a + c;
          end
        end
        assign dot = tree[tree_off(LOG_SIMD) +: SW];
      end
    end
  endgenerate

  // ---------------------------------------------------------------- accumulators
  wire [CW-1:0] ca = ctrl[DEPTH-1];
  wire a_valid = ca[CW-1];
  wire [AI-1:0] a_rf = ca[4 +: AI];
  wire a_first = ca[3], a_last = ca[2], a_cfirst = ca[1], a_clast = ca[0];

  reg [PE*32-1:0] acc;                          // running sums of the current row step
  reg [PE*32-1:0] accmem [0:TILE_RSTEPS-1];     // partial sums between column tiles
  wire [PE*32-1:0] acc_in = a_cfirst ? accmem[a_rf] : acc;
  wire [PE*32-1:0] acc_next;
  generate
    for (gp = 0; gp < PE; gp = gp + 1) begin : g_acc
      wire signed [SW-1:0] d = dots[gp*SW +: SW];
      wire signed [31:0] base = a_first ? 32'sd0 : $signed(acc_in[gp*32 +: 32]);
      assign acc_next[gp*32 +: 32] = base + {{(32-SW){d[SW-1]}}, d};
    end
  endgenerate

  assign en = !(y_valid && !y_ready);
  always @(posedge clk) begin
    if (rst) begin
      y_valid <= 1'b0;
    end else if (en) begin
      y_valid <= a_valid && a_last;
      if (a_valid) begin
        acc <= acc_next;
        y_data <= acc_next;
        if (a_clast && !a_last) accmem[a_rf] <= acc_next;
      end
    end
  end
endmodule

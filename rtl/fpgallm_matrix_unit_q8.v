// fpgallm matrix unit with int8 output, Verilog-2005: fpgallm_matrix_unit (int8 weights,
// whole-row accumulators) followed by fpgallm_requant_i8, i.e. kernels::matmul_w8a8's
// accumulators requantized by kernels::requantize_i8 for a consumer with a fixed input
// scale. Streams and configuration: those of the two modules; the unit's accumulator
// stream feeds the requantizer, whose code stream is this module's result stream y. A code word is valid
// fpgallm_matrix_unit's LATENCY + 4 clock edges after the edge that accepted the last
// weight word of its row step (no stall).
module fpgallm_matrix_unit_q8 #(
  parameter integer PE = 4,
  parameter integer SIMD = 8,
  parameter integer TILE_ROWS = 8,
  parameter integer TILE_COLS = 16,
  parameter integer CNT_BITS = 16
) (
  input  wire                     clk,
  input  wire                     rst,
  input  wire [CNT_BITS-1:0]      cfg_row_steps,
  input  wire [CNT_BITS-1:0]      cfg_col_steps,
  input  wire [31:0]              cfg_x_scale,
  input  wire [31:0]              cfg_inv_out_scale,
  input  wire [PE*SIMD*8-1:0]     w_data,
  input  wire                     w_valid,
  output wire                     w_ready,
  input  wire [SIMD*8-1:0]        x_data,
  input  wire                     x_valid,
  output wire                     x_ready,
  input  wire [PE*32-1:0]         s_data,
  input  wire                     s_valid,
  output wire                     s_ready,
  output wire [PE*8-1:0]          y_data,      // PE int8 codes, row p at bit 8p
  output wire                     y_valid,
  input  wire                     y_ready
);
  wire [PE*32-1:0] acc;
  wire acc_valid, acc_ready;
  fpgallm_matrix_unit #(.PE(PE), .SIMD(SIMD), .WBITS(8), .TILE_ROWS(TILE_ROWS), .TILE_COLS(TILE_COLS),
                        .GROUP_COLS(0), .CNT_BITS(CNT_BITS)) mvu (
    .clk(clk), .rst(rst), .cfg_row_steps(cfg_row_steps), .cfg_col_steps(cfg_col_steps),
    .w_data(w_data), .w_valid(w_valid), .w_ready(w_ready),
    .x_data(x_data), .x_valid(x_valid), .x_ready(x_ready),
    .y_data(acc), .y_valid(acc_valid), .y_ready(acc_ready));
  fpgallm_requant_i8 #(.PE(PE)) requant (
    .clk(clk), .rst(rst), .cfg_x_scale(cfg_x_scale), .cfg_inv_out_scale(cfg_inv_out_scale),
    .a_data(acc), .a_valid(acc_valid), .a_ready(acc_ready),
    .s_data(s_data), .s_valid(s_valid), .s_ready(s_ready),
    .q_data(y_data), .q_valid(y_valid), .q_ready(y_ready));
endmodule

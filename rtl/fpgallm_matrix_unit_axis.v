// The matrix unit as a free-running Vitis RTL kernel (ap_ctrl_none): AXI4-Stream ports
// named as Vitis packages them, active-low reset, and a 32-bit configuration stream in
// place of scalar arguments.
//   s_axis_cfg   one word per instruction: [15:0] row steps = ceil(rows / PE),
//                [31:16] column steps = ceil(cols / SIMD). Taken only between
//                instructions (after the previous instruction's last weight word).
//   s_axis_w     weight words, s_axis_x activation words, m_axis_y result words: the
//                formats of fpgallm_matrix_unit (rtl/fpgallm_matrix_unit.v).
// An instruction takes exactly row steps x column steps weight words (the tiles
// partition the matrix), which is what the wrapper counts.
module fpgallm_matrix_unit_axis #(
  parameter integer PE = 32,
  parameter integer SIMD = 32,
  parameter integer WBITS = 8,
  parameter integer TILE_ROWS = 128,
  parameter integer TILE_COLS = 256,
  parameter integer GROUP_COLS = 0
) (
  input  wire                     ap_clk,
  input  wire                     ap_rst_n,
  input  wire [31:0]              s_axis_cfg_tdata,
  input  wire                     s_axis_cfg_tvalid,
  output wire                     s_axis_cfg_tready,
  input  wire [PE*SIMD*WBITS-1:0] s_axis_w_tdata,
  input  wire                     s_axis_w_tvalid,
  output wire                     s_axis_w_tready,
  input  wire [SIMD*8-1:0]        s_axis_x_tdata,
  input  wire                     s_axis_x_tvalid,
  output wire                     s_axis_x_tready,
  output wire [PE*32-1:0]         m_axis_y_tdata,
  output wire                     m_axis_y_tvalid,
  input  wire                     m_axis_y_tready
);
  reg [15:0] row_steps, col_steps;
  reg [31:0] words_left;   // weight words of the current instruction not yet accepted
  wire rst = !ap_rst_n;
  wire busy = words_left != 0;
  wire w_ready;
  assign s_axis_cfg_tready = !rst && !busy;
  assign s_axis_w_tready = busy && w_ready;

  always @(posedge ap_clk) begin
    if (rst) begin
      words_left <= 0;
      row_steps <= 0;
      col_steps <= 0;
    end else if (!busy && s_axis_cfg_tvalid) begin
      row_steps <= s_axis_cfg_tdata[15:0];
      col_steps <= s_axis_cfg_tdata[31:16];
      words_left <= s_axis_cfg_tdata[15:0] * s_axis_cfg_tdata[31:16];
    end else if (s_axis_w_tvalid && s_axis_w_tready) begin
      words_left <= words_left - 1'b1;
    end
  end

  fpgallm_matrix_unit #(
    .PE(PE), .SIMD(SIMD), .WBITS(WBITS), .TILE_ROWS(TILE_ROWS), .TILE_COLS(TILE_COLS),
    .GROUP_COLS(GROUP_COLS), .CNT_BITS(16)
  ) unit (
    .clk(ap_clk), .rst(rst),
    .cfg_row_steps(row_steps), .cfg_col_steps(col_steps),
    .w_data(s_axis_w_tdata), .w_valid(s_axis_w_tvalid && busy), .w_ready(w_ready),
    .x_data(s_axis_x_tdata), .x_valid(s_axis_x_tvalid), .x_ready(s_axis_x_tready),
    .y_data(m_axis_y_tdata), .y_valid(m_axis_y_tvalid), .y_ready(m_axis_y_tready)
  );
endmodule

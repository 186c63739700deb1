// The .nn language, version 1 (see docs/LANGUAGE.md and docs/language-notes.md).
// The parse tree is turned into the AST by compiler/frontend/Parser.cpp (AstBuilder); nothing
// here evaluates anything.
grammar Nn;

file      : topItem* EOF ;
topItem   : letStmt | blockDecl | modelDecl | ';' ;

letStmt   : 'let' ID '=' expr ;
blockDecl : 'block' ID '(' paramList? ')' '{' body '}' ;
modelDecl : 'model' ID ( '(' paramList? ')' )? '{' body '}' ;
paramList : param ( ',' param )* ','? ;
param     : ID ( '=' expr )? ;

body      : stmt* ;
stmt      : letStmt
          | inputStmt
          | repeatStmt
          | residualStmt
          | layerStmt
          | ';'
          ;
inputStmt    : 'input' ID ':' dtype? '[' expr ( ',' expr )* ','? ']' ;
repeatStmt   : 'repeat' expr ( 'as' ID )? '{' body '}' ;
residualStmt : 'residual' '{' body '}' ( 'shortcut' '{' body '}' )? ;
layerStmt    : ( ID '=' )? ID ( '(' argList? ')' )? ;

argList   : arg ( ',' arg )* ','? ;
arg       : ( ID '=' )? argValue ;
argValue  : dtype                              # dtypeValue
          | '(' expr ',' expr ')'              # pairValue
          | expr                               # exprValue
          ;

expr      : op=('-' | '+') expr                # unaryExpr
          | expr op=('*' | '/') expr           # mulExpr
          | expr op=('+' | '-') expr           # addExpr
          | '(' expr ')'                       # parenExpr
          | INT                                # intExpr
          | FLOAT                              # floatExpr
          | ID                                 # nameExpr
          ;

dtype     : 'f32' | 'f16' | 'bf16' | 'i8' | 'i4' | 'i32' ;

FLOAT     : DIGITS '.' DIGITS? EXPONENT?
          | '.' DIGITS EXPONENT?
          | DIGITS EXPONENT
          ;
INT       : DIGITS ;
ID        : [A-Za-z_] [A-Za-z0-9_]* ;
fragment DIGITS   : [0-9] ( '_'? [0-9] )* ;
fragment EXPONENT : [eE] [+-]? [0-9]+ ;

COMMENT   : '#' ~[\r\n]* -> skip ;
WS        : [ \t\r\n\f]+ -> skip ;
// Anything else becomes a token the parser rejects, so our diagnostics report it.
BAD_CHAR  : . ;

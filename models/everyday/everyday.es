Hola, ¿cómo estás?
¡Buenos días!
Buenas noches, hasta mañana.
Encantado de conocerte.
Me llamo Anna.
¿Cómo te llamas?
Muchas gracias.
De nada.
Hasta luego.
Estoy bien, gracias.
¿De dónde eres?
Soy de Canadá.
Que tengas un buen día.
¡Feliz cumpleaños!
Perdona, lo siento.
¿Hablas inglés?
Hablo un poco de español.
No entiendo.
¿Puedes repetir eso, por favor?
¿Qué significa esta palabra?
¿Cómo se dice esto en español?
¿Dónde está el baño?
¿Cuánto cuesta?
¿Qué hora es?
¿Por qué estás triste?
¿Quién es ese hombre?
¿Qué autobús va al aeropuerto?
El gato se sentó en la alfombra.
Un perro pequeño le ladró al hombre.
Caminó hasta la casa vieja.
Mi hermana vive en una ciudad grande.
Me gusta leer libros.
Tengo dos hermanos y una hermana.
Mi padre trabaja en un hospital.
Mi madre es profesora.
Nuestros hijos van al colegio en autobús.
Mis abuelos viven en el campo.
Es mi mejor amiga.
Su hijo tiene diez años.
Visitamos a nuestra tía todos los veranos.
Mi hermano es más alto que yo.
El bebé está durmiendo.
Su marido es médico.
Tienen tres hijos.
Quiero mucho a mi familia.
Mi primo se casa el mes que viene.
¿Tienes hermanos?
Tengo hambre.
Quisiera una taza de café.
¿Me das un poco de agua, por favor?
Cenamos a las ocho.
La sopa está demasiado caliente.
No como carne.
Hace el mejor pan del pueblo.
El desayuno está listo.
¿Quieres más arroz?
Esta tarta está deliciosa.
Necesitamos huevos, leche y queso.
El restaurante cierra los lunes.
Me gustan más las manzanas que las naranjas.
Toma el té sin azúcar.
La cuenta, por favor.
La comida estuvo muy buena.
Estoy cocinando pollo con verduras.
La fruta es buena para la salud.
Hoy está lloviendo.
Hace mucho frío fuera.
Brilla el sol.
Mañana nevará.
¿Qué tiempo hace hoy?
Ayer hizo mucho calor.
Llévate un paraguas.
Me gusta el calor.
El cielo está nublado.
La primavera es mi estación favorita.
Por la noche hace fresco.
Son las tres.
Me levanto a las siete todos los días.
La reunión empieza a las nueve y media.
Hoy es lunes.
El sábado vamos a la playa.
Mi cumpleaños es en mayo.
Te llamaré mañana por la mañana.
La tienda abre a las diez.
Llevo una hora esperando.
Nos vemos la semana que viene.
Siempre llega tarde.
El tren sale dentro de veinte minutos.
Ayer fue un día largo.
Trabajo en una oficina.
Está buscando un trabajo nuevo.
Mi jefe es muy amable.
Tengo una reunión a mediodía.
Terminamos de trabajar a las cinco.
Los viernes trabaja desde casa.
Los estudiantes están haciendo un examen.
Se me olvidaron los deberes.
Nuestro profesor nos dio mucho trabajo.
¿Me puedes enviar el informe?
Estoy aprendiendo a conducir.
El ordenador no funciona.
Quiere estudiar medicina.
Necesito terminar esto hoy.
Perdió su trabajo el año pasado.
¿Dónde está la estación de tren?
Quisiera un billete para Madrid.
¿A qué distancia está el aeropuerto?
Gira a la izquierda en la próxima calle.
Sigue todo recto.
El hotel está cerca de la playa.
En agosto vamos a España.
Nuestro vuelo se retrasó.
He perdido el pasaporte.
¿Está libre este asiento?
El museo está abierto hasta las seis.
Quiero alquilar un coche para una semana.
¿Me lo puedes enseñar en el mapa?
Cogimos un taxi hasta el hotel.
Nunca he estado en Londres.
La parada de autobús está al otro lado de la calle.
¿Cuánto dura el viaje?
El verano pasado viajaron por Europa.
Vivo en un piso pequeño.
Cierra la ventana, por favor.
Las llaves están en la mesa.
Me ducho todas las mañanas.
Está fregando los platos.
Anoche vimos una película.
Mi móvil se ha quedado sin batería.
Necesito comprar zapatos nuevos.
Se acuesta temprano.
La casa tiene tres dormitorios.
Apaga las luces, por favor.
Estoy cansado.
Está escuchando música.
Limpio mi habitación los domingos.
La puerta está abierta.
Nuestros vecinos son muy simpáticos.
Saco al perro después de cenar.
Los niños están jugando en el jardín.
Me duele la cabeza.
Hoy se encuentra mucho mejor.
Deberías ir al médico.
Me alegro de verte.
Estaba muy enfadada.
¿Estás bien?
Me dan miedo los perros.
Estábamos preocupados por ti.
Me duele la pierna.
Ayer fui al mercado.
Vimos a tu hermano en el parque.
La semana pasada se compró un coche nuevo.
Llegaron tarde anoche.
El próximo fin de semana visitaré a mis padres.
Esta tarde va a llover.
Estará aquí dentro de diez minutos.
Vamos a comprar una casa.
Nací en 1990.
¿Has dormido bien?
Me ha llamado esta mañana.
¿Qué hiciste el fin de semana?
Terminaré el trabajo mañana.
¿Cuándo vas a volver?
No me gusta el café.
No está en casa.
No fuimos a la fiesta.
Nunca come pescado.
Aquí no hay nadie.
No tengo tiempo.
Hoy no vendrán.
No toques eso.
No encuentro mis llaves.
No es fácil.
Tengo tres gatos.
Esta camisa cuesta veinte euros.
Una semana tiene siete días.
Tiene treinta años.
Necesitamos dos sillas más.
El libro tiene doscientas páginas.
Vivo en el número 12.
La mitad de los estudiantes están enfermos.
Compré un kilo de tomates.
¿Aceptan tarjetas de crédito?
Es demasiado caro.
¿Puedo pagar con tarjeta?
¿Me puedes ayudar, por favor?
Habla más despacio, por favor.
¿Me abres la puerta?
¿Quieres algo de beber?
¿Puedo pasar?
Espera un momento, por favor.
¿Me puedes decir cómo llegar a la estación?
Avísame si necesitas algo.
Siéntate, por favor.
¿Me prestas un bolígrafo?
Me lo dieron.
Esta bolsa es mía, no tuya.
Le dijimos la verdad.
¿La conoces?
Te he comprado estas flores.
